"""deploy/Dockerfile and its dependency lock, checked by parsing (no container engine runs here).

The image must build from a base pinned to a patch version, install dependencies only from the
hashed lock, keep pip out of the final stage, carry OCI labels, and start what the manifests in
deploy/ run: their ``command`` must be a program the image provides.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
LOCK = ROOT / "deploy" / "requirements.lock"
BUILD_LOCK = ROOT / "deploy" / "build-requirements.lock"
MANIFESTS = [ROOT / "deploy" / "kubernetes" / d / f"{d}.yaml" for d in ("job", "cronjob", "deployment")]


@dataclass
class Stage:
    base: str
    name: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, op: str) -> list[str]:
        return [arg for o, arg in self.instructions if o == op]


def parse() -> tuple[dict[str, str], list[Stage]]:
    """(global ARG defaults, stages) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        op, _, rest = line.partition(" ")
        op = op.upper()
        if op == "FROM":
            image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], rest.split()[0])
            name = rest.split()[2] if " AS " in rest.upper() else ""
            stages.append(Stage(image, name))
        elif op == "ARG" and not stages:
            key, _, value = rest.partition("=")
            args[key] = value
        elif stages:
            stages[-1].instructions.append((op, rest.strip()))
    return args, stages


def exec_form(arg: str) -> list[str]:
    value = json.loads(arg)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value)
    return value


def pins(lock: Path) -> dict[str, tuple[str, int]]:
    """name -> (version, number of hashes) of a pip-compile/uv lock."""
    out: dict[str, tuple[str, int]] = {}
    text = re.sub(r"\\\n", " ", lock.read_text())
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.match(r"^([A-Za-z0-9_.\-]+)==(\S+)(.*)$", line)
        assert m, f"{lock.name}: not an exact pin: {line!r}"
        out[canonicalize_name(m.group(1))] = (
            m.group(2),
            len(re.findall(r"--hash=sha256:[0-9a-f]{64}", m.group(3))),
        )
    return out


def test_every_stage_builds_from_a_base_pinned_to_a_patch_version() -> None:
    _, stages = parse()
    assert len(stages) >= 2, "a multi-stage build: the final stage copies what the build stage made"
    for stage in stages:
        assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?", stage.base), (
            stage.base
        )


def test_dependencies_come_from_the_hashed_lock() -> None:
    _, stages = parse()
    build = stages[0]
    runs = " ".join(build.all("RUN"))
    installs = re.findall(r"pip (?:--python \S+ )?install ([^&]+)", runs)
    assert installs, runs
    for cmd in installs:
        # either from a lock with hashes, or desched's own wheel without its dependencies
        assert ("--require-hashes" in cmd and "-r /tmp/" in cmd) or (
            "--no-deps" in cmd and "/wheels/" in cmd
        ), cmd
    assert "--no-build-isolation" in runs  # the build backend comes from its lock, not an unpinned download
    copies = " ".join(build.all("COPY"))
    assert "deploy/requirements.lock" in copies and "deploy/build-requirements.lock" in copies


def test_the_lock_covers_pyprojects_runtime_dependencies_with_hashes() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for lock, requirements in (
        (LOCK, project["project"]["dependencies"]),
        (BUILD_LOCK, project["build-system"]["requires"]),
    ):
        pinned = pins(lock)
        for spec in requirements:
            req = Requirement(spec)
            name = canonicalize_name(req.name)
            assert name in pinned, f"{lock.name} lacks {req.name}: run hack/update-requirements-lock.sh"
            version, hashes = pinned[name]
            assert req.specifier.contains(version, prereleases=True), (
                f"{lock.name}: {name}=={version} is not {spec}"
            )
        for pinned_name, (version, hashes) in pinned.items():
            assert hashes >= 1, f"{lock.name}: {pinned_name}=={version} has no hash"


def test_no_pip_in_the_final_image() -> None:
    _, stages = parse()
    final = stages[-1]
    for run in final.all("RUN"):
        assert not re.search(r"\bpip3?\b (install|wheel|download)|-m ensurepip|get-pip", run), run
    removed = " ".join(final.all("RUN"))
    for path in ("/usr/local/bin/pip*", "site-packages/pip*", "ensurepip/_bundled"):
        assert path in removed, f"the final stage keeps {path}"
    build_runs = " ".join(stages[0].all("RUN"))
    assert "venv --without-pip /opt/desched" in build_runs  # the copied venv has no pip of its own
    assert any("--from=build /opt/desched /opt/desched" in c for c in final.all("COPY"))


def test_oci_labels_and_a_non_root_user() -> None:
    _, stages = parse()
    labels = " ".join(stages[-1].all("LABEL"))
    for key in ("title", "description", "version", "revision", "licenses", "base.name"):
        assert f"org.opencontainers.image.{key}=" in labels, key
    user = stages[-1].all("USER")
    assert user and not user[-1].startswith(("0", "root"))
    env = " ".join(stages[-1].all("ENV"))
    assert "DESCHED_GIT_SHA=${GIT_SHA}" in env  # what descheduler_build_info reports in the image


def test_entrypoint_and_cmd_agree_with_the_manifests() -> None:
    _, stages = parse()
    final = stages[-1]
    entrypoint = exec_form(final.all("ENTRYPOINT")[-1])
    cmd = exec_form(final.all("CMD")[-1])
    assert entrypoint == ["desched"] and cmd[0] == "run"
    # the programs the image provides: ENTRYPOINT's on PATH, and upstream's /bin/descheduler
    copies = final.all("COPY")
    assert any(c.endswith("deploy/bin/descheduler /usr/bin/descheduler") for c in copies)  # /bin -> usr/bin
    programs = {"desched", "/bin/descheduler"}
    cmd_flags = dict(a.split("=", 1) for a in cmd[1:])
    for path in MANIFESTS:
        for doc in yaml.safe_load_all(path.read_text()):
            spec = doc["spec"]
            if doc["kind"] == "CronJob":
                spec = spec["jobTemplate"]["spec"]
            pod = spec["template"]["spec"]
            container = pod["containers"][0]
            assert container["command"][0] in programs, (path.name, container["command"])
            assert container["command"] == ["desched", "run"], path.name
            args = dict(a.split("=", 1) for a in container["args"] if "=" in a)
            # the image's default args and the manifests' agree on where the policy and certs live
            assert args["--policy-config-file"] == cmd_flags["--policy-config-file"], path.name
            assert args["--cert-dir"] == cmd_flags["--cert-dir"], path.name
            mounts = {m["mountPath"] for m in container["volumeMounts"]}
            assert str(Path(args["--policy-config-file"]).parent) in mounts and "/tmp" in mounts, path.name


def test_bin_descheduler_is_desched_run() -> None:
    """Upstream's command (/bin/descheduler FLAGS) runs `desched run FLAGS`."""
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    wrapper = subprocess.run(
        ["/bin/sh", str(ROOT / "deploy" / "bin" / "descheduler"), "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    direct = subprocess.run(
        [str(Path(sys.executable).parent / "desched"), "run", "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert wrapper.stdout == direct.stdout and "--policy-config-file" in wrapper.stdout
