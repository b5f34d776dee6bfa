"""The release: .github/workflows/release.yml (checked by actionlint, as .ci/run does) and the chart
it packages (hack/release/package-chart.sh), whose default image is the one the workflow pushes."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.tools import tool

ROOT = Path(__file__).resolve().parents[3]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"


@pytest.fixture(scope="module")
def actionlint() -> str:
    return tool("DESCHED_ACTIONLINT", "build-actionlint.sh")


@pytest.fixture(scope="module")
def helm() -> str:
    return tool("DESCHED_HELM", "build-helm.sh")


def workflow() -> dict[Any, Any]:
    return dict(yaml.safe_load(WORKFLOW.read_text()))


def steps(job: str) -> list[dict[str, Any]]:
    return list(workflow()["jobs"][job]["steps"])


def test_workflows_pass_actionlint(actionlint: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [actionlint, "-no-color", *map(str, sorted((ROOT / ".github" / "workflows").glob("*.yml")))],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the check is live: a job that needs one that does not exist is caught
    broken = tmp_path / ".github" / "workflows" / "release.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(WORKFLOW.read_text().replace("needs: [version, image]", "needs: [version, imag]"))
    proc = subprocess.run(
        [actionlint, "-no-color", str(broken)], capture_output=True, text=True, check=False, cwd=tmp_path
    )
    assert proc.returncode == 1 and '"imag"' in proc.stdout, proc.stdout + proc.stderr


def test_ci_runs_actionlint() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "hack/e2e/build-actionlint.sh" in ci and ".github/workflows" in ci


def test_the_release_builds_a_multi_arch_image_with_provenance_and_sbom() -> None:
    assert workflow()[True] == {"push": {"tags": ["v*.*.*"]}}  # YAML 1.1 reads the key `on` as True
    (build,) = [s for s in steps("image") if s.get("uses", "").startswith("docker/build-push-action@")]
    args = build["with"]
    assert set(args["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert args["push"] is True and args["sbom"] is True and args["provenance"] == "mode=max"
    assert args["file"] == "deploy/Dockerfile" and (ROOT / args["file"]).is_file()
    assert args["tags"] == "${{ needs.version.outputs.image }}:${{ needs.version.outputs.version }}"
    assert any(s.get("uses", "").startswith("docker/setup-buildx-action@") for s in steps("image"))
    assert workflow()["jobs"]["image"]["permissions"]["packages"] == "write"


def test_the_release_pushes_the_chart_as_oci_and_builds_the_wheel() -> None:
    chart = "\n".join(s.get("run", "") for s in steps("chart"))
    assert (
        "bash hack/release/package-chart.sh" in chart and 'helm push "dist/desched-${VERSION}.tgz"' in chart
    )
    assert '"oci://${CHARTS}"' in chart
    wheel = "\n".join(s.get("run", "") for s in steps("wheel"))
    assert "python -m build --outdir dist/" in wheel and "gh release upload" in wheel
    # the tested suite gates every artefact
    jobs = workflow()["jobs"]
    assert "test" in jobs["wheel"]["needs"] and "test" in jobs["image"]["needs"]
    assert "image" in jobs["chart"]["needs"]
    assert any("bash .ci/run" in s.get("run", "") for s in steps("test"))


def test_the_packaged_chart_defaults_to_the_image_the_release_pushes(helm: str, tmp_path: Path) -> None:
    env = {**os.environ, "HELM": helm}
    proc = subprocess.run(
        [
            "bash",
            str(ROOT / "hack" / "release" / "package-chart.sh"),
            "ghcr.io/acme/desched",
            "9.8.7",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    package = tmp_path / "desched-9.8.7.tgz"
    with tarfile.open(package) as tar:
        meta = yaml.safe_load(tar.extractfile("desched/Chart.yaml").read())  # type: ignore[union-attr]
    assert meta["version"] == "9.8.7" and meta["appVersion"] == "9.8.7"

    def image(*args: str) -> str:
        out = subprocess.run(
            [helm, "template", "rel", str(package), "--namespace", "kube-system", *args],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        (cron,) = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "CronJob"]
        return str(cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"])

    assert image() == "ghcr.io/acme/desched:9.8.7"
    # upstream's image block, too, becomes the pushed image
    assert (
        image("--set", "image.repository=registry.k8s.io/descheduler/descheduler")
        == "ghcr.io/acme/desched:9.8.7"
    )
    # the repository's own chart keeps its placeholder
    assert "ghcr.io/your-org/desched" in (ROOT / "deploy" / "helm" / "desched" / "values.yaml").read_text()
