"""Every command the docs show is run by a test, and prints what the docs show.

The docs are README.md, every Markdown file under docs/, each in-tree plugin's README.md (beside
its code), deploy/helm/desched/README.md and examples/desched-example-plugin/README.md
(``DOC_FILES``). Each fenced block must say what it
holds (an untagged fence fails), and commands live only in shell blocks:

- ```` ```sh ```` (also ``bash``, ``shell``): every line is a command (``\\`` continues a line,
  ``# ...`` is a comment); no output is shown for them.
- ```` ```console ```` (or ```` ```text ```` with ``$ `` lines): a line ``$ COMMAND`` is a
  command, the lines after it up to the next ``$ `` line are what it prints.
- Any other ```` ```text ```` block holds no command. One starting with ``desched SUBCOMMAND`` is a
  usage synopsis: each ``--flag`` in it must be one ``desched SUBCOMMAND --help`` lists.

Each command (each part of an ``A && B`` chain) is then either

(a) offline (``OFFLINE``: ``desched simulate|validate|version|completion``, ``--help``): run here, as the
    installed ``desched`` entry point of the venv running the tests, in the repository root. Shown
    output is compared with stdout and stderr as printed, after this normalisation only: trailing
    blanks of each line and blank lines at the start and end are dropped, and a shown line
    ``...`` stands for any number of printed lines (so ``...`` first means "ends with"). The exit
    status must be 2 when the shown output ends with a ``desched: error:`` line, else 0; or
(b) needing a cluster, a network or other tools: it must match an entry of ``ELSEWHERE``, which
    names the test that runs it (or its exact equivalent) and why it is not run here. Every
    named test must exist, every repository path the command names must exist, and every entry
    must still match a command in the docs.

A command in neither class fails the test, so a new doc command cannot slip in untested. The
log lines the docs show (``desched run``'s, in ```` ```text ```` and ```` ```json ```` blocks) are
checked too, see ``test_log_sample_is_what_desched_logs``. The bundled examples keep the run short
(~10 s).
"""

from __future__ import annotations

import ast
import json
import logging
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from desched import logs

ROOT = Path(__file__).resolve().parents[3]

DOC_FILES = sorted(
    {
        ROOT / "README.md",
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "src" / "desched" / "plugins").glob("*/README.md"),
        ROOT / "deploy" / "helm" / "desched" / "README.md",
        ROOT / "examples" / "desched-example-plugin" / "README.md",
    }
)

SHELL_LANGS = {"sh", "bash", "shell"}
CONSOLE_LANGS = {"console"}

# (a) run here: the CLI offline, on the files of the repository.
OFFLINE = re.compile(
    r"^(?:\.venv/bin/)?desched (?:simulate|validate|version|completion)\b"
    r"|^(?:\.venv/bin/)?desched(?: [a-z]+)? (?:--help|-h)$"
)


@dataclass(frozen=True)
class Elsewhere:
    pattern: str  # a regular expression matched against the whole command
    tests: tuple[str, ...]  # "path::test_name" of the tests that run it
    why: str  # why this test does not run it itself


# (b) commands this test cannot run; each names where it is exercised.
ELSEWHERE: tuple[Elsewhere, ...] = (
    Elsewhere(
        r"python3 -m venv \.venv",
        ("tests/unit/cli/test_docs_commands.py::test_offline_command_prints_what_the_docs_show",),
        "creates the venv the tests run in (scripts/test.sh runs the same); the offline commands "
        "here run that venv's desched entry point",
    ),
    Elsewhere(
        r"\.venv/bin/pip install (?:-q )?-e \.",
        ("tests/unit/cli/test_docs_commands.py::test_offline_command_prints_what_the_docs_show",),
        "installs desched into that venv (scripts/test.sh runs it with the test extras); needs the "
        "package index",
    ),
    Elsewhere(
        r"bash scripts/test\.sh",
        ("tests/unit/cli/test_docs_commands.py::test_scripts_test_sh_runs_what_the_docs_say",),
        "runs every suite, e2e included (tens of minutes)",
    ),
    Elsewhere(
        r"(?:KUBECONFIG=\S+ DESCHED_E2E_USE_KUBECONFIG=1 )?(?:\.venv/bin/)?python -m pytest"
        r"(?: tests/(?:e2e|conformance))?(?: -m \"not e2e\")?(?: -v)?",
        ("tests/unit/cli/test_docs_commands.py::test_scripts_test_sh_runs_what_the_docs_say",),
        "runs (part of) the test suites themselves; the paths are checked to exist",
    ),
    Elsewhere(
        r"\.venv/bin/python -m pytest tests/unit/plugins/test_in_tree\.py "
        r"tests/unit/plugins/test_plugin_readmes\.py tests/unit/test_architecture\.py -q",
        (
            "tests/unit/plugins/test_in_tree.py::test_every_plugin_folder_is_in_the_in_tree_list_and_exports_its_plugin_and_args",
            "tests/unit/plugins/test_in_tree.py::test_the_independence_contract_lists_every_plugin_folder",
            "tests/unit/plugins/test_plugin_readmes.py::test_every_in_tree_plugin_has_a_folder",
            "tests/unit/test_architecture.py::test_a_plugin_folder_holds_its_story",
        ),
        "design.md's plugin checklist: runs these test files, which every suite run runs; the paths "
        "are checked to exist",
    ),
    Elsewhere(
        r"\.venv/bin/python -m pytest tests/unit/plugins/removefailedpods tests/conformance -q",
        (
            "tests/unit/plugins/removefailedpods/test_removefailedpods.py::test_only_failed_pods_even_when_a_reason_matches",
            "tests/conformance/test_upstream_fixtures.py::test_strategy_fixture",
            "tests/conformance/test_upstream_fixtures.py::test_default_evictor_fixture",
        ),
        "design.md's plugin checklist: a plugin's tests and the conformance tier, which every suite "
        "run runs; the paths are checked to exist",
    ),
    Elsewhere(
        r"\.venv/bin/lint-imports --no-cache",
        ("tests/unit/test_architecture.py::test_the_import_contracts_hold",),
        "the test runs the venv's lint-imports --no-cache and requires every contract kept",
    ),
    Elsewhere(
        r"HYPOTHESIS_PROFILE=long \.venv/bin/python -m pytest tests/unit/fuzz -q",
        ("tests/unit/fuzz/test_fuzz_schema.py::test_the_long_profile_command_runs",),
        "the long fuzz campaign (about 15 min of CPU); the test runs this command with "
        "DESCHED_FUZZ_EXAMPLES=2 on one fuzz test, and the fast profile runs every fuzz test",
    ),
    Elsewhere(
        r"(?:\.venv/bin/)?python -m benchmarks .*",
        ("tests/unit/bench/test_benchmark_command.py::test_benchmark_command_reports_every_figure",),
        "minutes at 1,000 and 5,000 nodes; the test runs the same command at 20 nodes",
    ),
    Elsewhere(
        r"\.venv/bin/python -m tests\.differential(?: --fast)?(?: -v)?",
        ("tests/differential/test_upstream_envelope.py::test_fast_matrix_inside_upstreams_envelope",),
        "the whole matrix takes tens of minutes; the test runs its fast subset through the same "
        "code (matrix.run_case, the summary, allowances.json)",
    ),
    Elsewhere(
        r"python -m benchmarks\.live .*",
        ("tests/e2e/test_live_benchmark.py::test_live_benchmark_reports_every_figure",),
        "needs the e2e control plane and tens of minutes at 1,000 nodes; the test runs it at 4 nodes",
    ),
    Elsewhere(
        r"helm install desched deploy/helm/desched --namespace kube-system",
        ("tests/e2e/test_as_shipped.py::test_helm_defaults_run_as_shipped",),
        "needs helm and a cluster; the e2e test renders the chart with its defaults and runs what "
        "it renders against a real apiserver",
    ),
    Elsewhere(
        r"helm install desched deploy/helm/desched --namespace kube-system -f \S+",
        ("tests/e2e/test_as_shipped.py::test_helm_upstream_values_file_runs_as_shipped",),
        "needs helm and a cluster; the e2e test renders the chart with an upstream values file and runs it",
    ),
    Elsewhere(
        r'docker build -f deploy/Dockerfile --build-arg GIT_SHA="\$\(git rev-parse HEAD\)" -t \S+ \.',
        (
            "tests/unit/deploy/test_dockerfile.py::test_entrypoint_and_cmd_agree_with_the_manifests",
            "tests/unit/deploy/test_release.py::test_the_release_builds_a_multi_arch_image_with_provenance_and_sbom",
        ),
        "needs a container engine, which the test machine has not: the Dockerfile is checked by "
        "parsing, and the release workflow (checked by actionlint) builds it with buildx",
    ),
    Elsewhere(
        r"docker push \S+",
        (
            "tests/unit/deploy/test_release.py::test_the_release_builds_a_multi_arch_image_with_provenance_and_sbom",
        ),
        "needs a registry; the release workflow pushes the image (build-push-action, push: true)",
    ),
    Elsewhere(
        r"helm install desched deploy/helm/desched --namespace kube-system --set image\.repository=\S+",
        ("tests/e2e/test_as_shipped.py::test_helm_with_your_image_runs_as_shipped",),
        "needs helm and a cluster; the e2e test renders the chart with the same --set, checks the "
        "image and runs what it renders against a real apiserver",
    ),
    Elsewhere(
        r"helm test desched --namespace kube-system",
        (
            "tests/e2e/test_helm_chart.py::test_helm_test_pod_passes_a_good_policy",
            "tests/e2e/test_helm_chart.py::test_helm_test_pod_fails_a_bad_policy",
        ),
        "needs a cluster that runs pods; the tests run the rendered test pod's command on the "
        "policy it mounts",
    ),
    Elsewhere(
        r"\(cd deploy/kubernetes/cronjob",
        ("tests/e2e/test_as_shipped.py::test_kustomize_with_your_image_runs_as_shipped",),
        "the first half of `kustomize edit set image` in the CronJob's directory (edits the "
        "checkout); the test runs it on a copy",
    ),
    Elsewhere(
        r"kustomize edit set image ghcr\.io/your-org/desched=\S+\)",
        ("tests/e2e/test_as_shipped.py::test_kustomize_with_your_image_runs_as_shipped",),
        "needs kustomize and edits the checkout; the test runs it on a copy of deploy/kubernetes",
    ),
    Elsewhere(
        r"kubectl apply -k deploy/kubernetes/cronjob",
        ("tests/e2e/test_as_shipped.py::test_kustomize_with_your_image_runs_as_shipped",),
        "needs a cluster; the test builds the same kustomization (kustomize build) and runs it "
        "against a real apiserver",
    ),
    Elsewhere(
        r"pip install \./examples/desched-example-plugin",
        ("tests/unit/framework/test_out_of_tree_plugin.py::test_example_plugin_installs_and_runs",),
        "installs a package; the test pip-installs it into a temporary directory",
    ),
    Elsewhere(
        r"desched simulate examples/cluster\.yaml --policy examples/desched-example-plugin/policy\.yaml",
        ("tests/unit/framework/test_out_of_tree_plugin.py::test_example_plugin_installs_and_runs",),
        "needs the example plugin installed; the test installs it and runs this simulation",
    ),
)

# Commands in a text block that is not a console transcript: the block must be a synopsis.
COMMAND_WORD = re.compile(r"^\s*(?:\$ |desched |kubectl |helm |docker |python|pytest|bash |\.venv/|\w+=\S* )")


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int  # 1-based line of the opening fence
    lang: str
    body: tuple[str, ...]

    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


@dataclass(frozen=True)
class Command:
    block: Block
    text: str
    shown: tuple[str, ...] | None  # None: the doc shows no output for it

    def where(self) -> str:
        return self.block.where()


def blocks(doc: Path) -> list[Block]:
    """The fenced blocks of a Markdown file (fences may be indented, as inside a list item)."""
    out: list[Block] = []
    lines = doc.read_text().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(`{3,})\s*(\S*)\s*$", lines[i])
        if m is None:
            i += 1
            continue
        indent, fence, lang = m.groups()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != fence:
            line = lines[i]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            i += 1
        assert i < len(lines), f"{doc.relative_to(ROOT)}:{start + 1}: fence never closed"
        out.append(Block(doc, start + 1, lang, tuple(body)))
        i += 1
    return out


ALL_BLOCKS = [b for doc in DOC_FILES for b in blocks(doc)]


def is_transcript(block: Block) -> bool:
    return block.lang in CONSOLE_LANGS or (
        block.lang == "text" and any(ln.startswith("$ ") for ln in block.body)
    )


def commands_of(block: Block) -> list[Command]:
    if block.lang in SHELL_LANGS:
        out: list[Command] = []
        pending = ""
        for raw in block.body:
            line = raw.strip()
            if pending:
                line = pending + " " + line
                pending = ""
            if line.endswith("\\"):
                pending = line[:-1].strip()
                continue
            line = re.sub(r"\s+#.*$", "", line)
            if line and not line.startswith("#"):
                out.append(Command(block, " ".join(line.split()), None))
        assert not pending, f"{block.where()}: a line continued past the end of the block"
        return out
    if is_transcript(block):
        out = []
        for raw in block.body:
            if raw.startswith("$ "):
                out.append(Command(block, " ".join(raw[2:].split()), ()))
            else:
                assert out, f"{block.where()}: output before the first '$ ' command"
                last = out[-1]
                out[-1] = Command(block, last.text, (*(last.shown or ()), raw))
        return out
    return []


ALL_COMMANDS = [c for b in ALL_BLOCKS for c in commands_of(b)]


def parts(command: str) -> list[str]:
    return [p.strip() for p in command.split("&&")]


def elsewhere_for(part: str) -> Elsewhere | None:
    for entry in ELSEWHERE:
        if re.fullmatch(entry.pattern, part):
            return entry
    return None


def offline(part: str) -> bool:
    return elsewhere_for(part) is None and OFFLINE.search(part) is not None


def run_desched(part: str) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(part)
    entry = Path(sys.executable).parent / "desched"
    assert entry.exists(), f"no desched entry point next to {sys.executable}: pip install -e . first"
    return subprocess.run(
        [str(entry), *argv[1:]],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def trim(lines: list[str]) -> list[str]:
    lines = [ln.rstrip() for ln in lines]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def matches(shown: list[str], printed: list[str]) -> bool:
    """``shown`` equals ``printed``, a shown ``...`` line standing for any run of printed lines."""
    if not shown:
        return not printed
    if shown[0] == "...":
        return any(matches(shown[1:], printed[k:]) for k in range(len(printed) + 1))
    return bool(printed) and shown[0] == printed[0] and matches(shown[1:], printed[1:])


def test_the_docs_show_commands() -> None:
    # The mechanism found what it is meant to find (a parser that finds nothing proves nothing).
    assert len(ALL_COMMANDS) >= 10, [c.text for c in ALL_COMMANDS]
    assert any(c.shown for c in ALL_COMMANDS if any(offline(p) for p in parts(c.text)))


def test_every_fence_says_what_it_holds() -> None:
    untagged = [b.where() for b in ALL_BLOCKS if not b.lang]
    assert not untagged, f"fenced blocks without a language (sh, console, text, yaml, ...): {untagged}"


def test_commands_are_only_in_shell_blocks() -> None:
    bad = []
    for b in ALL_BLOCKS:
        if b.lang != "text" or is_transcript(b) or is_synopsis(b):
            continue
        bad += [f"{b.where()}: {ln!r}" for ln in b.body if COMMAND_WORD.match(ln)]
    assert not bad, f"a command in a text block: use ```sh or ```console: {bad}"


@pytest.mark.parametrize(
    "command",
    ALL_COMMANDS,
    ids=[f"{c.where()}:{c.text[:60]}" for c in ALL_COMMANDS],
)
def test_every_doc_command_is_run_here_or_elsewhere(command: Command) -> None:
    for part in parts(command.text):
        assert offline(part) or elsewhere_for(part) is not None, (
            f"{command.where()}: `{part}` is neither run by this test (OFFLINE) nor listed in "
            "ELSEWHERE with the test that runs it"
        )


OFFLINE_COMMANDS = [c for c in ALL_COMMANDS if any(offline(p) for p in parts(c.text))]


@pytest.mark.parametrize(
    "command", OFFLINE_COMMANDS, ids=[f"{c.where()}:{c.text[:60]}" for c in OFFLINE_COMMANDS]
)
def test_offline_command_prints_what_the_docs_show(command: Command) -> None:
    runnable = [p for p in parts(command.text) if offline(p)]
    assert len(runnable) == 1 and parts(command.text)[-1] == runnable[0], (
        f"{command.where()}: only the last part of an && chain can be an offline command"
    )
    proc = run_desched(runnable[0])
    printed = trim(proc.stdout.split("\n"))
    shown = trim(list(command.shown or ()))
    failing = bool(shown) and shown[-1].startswith("desched: error:")
    assert proc.returncode == (2 if failing else 0), (
        f"{command.where()}: exit {proc.returncode}\n{proc.stdout}"
    )
    if command.shown is None:
        return  # a ```sh block shows no output; the command must still succeed
    assert matches(shown, printed), (
        f"{command.where()}: `{command.text}` prints something else than the doc shows.\n"
        "--- shown\n" + "\n".join(shown) + "\n--- printed\n" + "\n".join(printed)
    )


def test_elsewhere_entries_name_real_tests_and_paths() -> None:
    for entry in ELSEWHERE:
        used = [c for c in ALL_COMMANDS for p in parts(c.text) if re.fullmatch(entry.pattern, p)]
        assert used, f"ELSEWHERE entry {entry.pattern!r} matches no command in the docs any more: drop it"
        for test in entry.tests:
            path, name = test.split("::")
            tree = ast.parse((ROOT / path).read_text())
            names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
            assert name in names, f"ELSEWHERE names {test}, which does not exist"
        for c in used:
            for part in parts(c.text):
                for arg in shlex.split(part):
                    if re.fullmatch(r"(?:\./)?[\w.-]+/[\w./-]*", arg) and not arg.startswith(".venv/"):
                        assert (ROOT / arg).exists(), (
                            f"{c.where()}: `{part}` names {arg}, which does not exist"
                        )


def test_scripts_test_sh_runs_what_the_docs_say() -> None:
    # README.md's and docs/testing.md's test commands: the script installs the test extras, builds
    # the e2e tools and runs pytest over every suite; pytest is configured with the e2e marker the
    # `-m "not e2e"` command selects on.
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert re.search(r"pip install -q -e \"\.\[test,report\]\"", script)
    for tool in ("build-control-plane.sh", "build-helm.sh", "build-kustomize.sh", "build-upstream-diff.sh"):
        assert f"hack/e2e/{tool}" in script and (ROOT / "hack" / "e2e" / tool).exists()
    assert re.search(r"^\.venv/bin/python -m pytest \"\$@\"$", script, re.M)
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r"^\s*\"e2e:", pyproject, re.M), "the e2e marker is not registered in pyproject.toml"


#: A figure of the suite's size or time: "2,874 tests", "30 min 52 s", "1,894 s".
SUITE_FIGURE = re.compile(r"\b\d{1,2},\d{3} tests\b|\b\d+ min \d+ s\b|\b\d{1,2},\d{3} s\b")


def test_readme_and_testing_md_give_the_same_suite_figures() -> None:
    """README.md's test paragraph and docs/testing.md's "The suites" state the same sizes and times."""
    readme = (ROOT / "README.md").read_text()
    paragraph = readme.split("bash scripts/test.sh\n```", 1)[1].split("\n## ", 1)[0]
    suites = (ROOT / "docs" / "testing.md").read_text().split("## The suites", 1)[1].split("\n## ", 1)[0]
    figures = set(SUITE_FIGURE.findall(" ".join(paragraph.split())))
    assert len(figures) >= 4, figures
    missing = figures - set(SUITE_FIGURE.findall(" ".join(suites.split())))
    assert not missing, f"docs/testing.md does not state README.md's {sorted(missing)}"


SYNOPSIS = re.compile(r"^desched ([a-z]+) ")


def is_synopsis(block: Block) -> bool:
    return block.lang == "text" and bool(block.body) and SYNOPSIS.match(block.body[0]) is not None


SYNOPSES = [b for b in ALL_BLOCKS if is_synopsis(b)]


@pytest.mark.parametrize("block", SYNOPSES, ids=[b.where() for b in SYNOPSES])
def test_synopsis_flags_are_real(block: Block) -> None:
    m = SYNOPSIS.match(block.body[0])
    assert m is not None
    proc = run_desched(f"desched {m.group(1)} --help")
    assert proc.returncode == 0, proc.stdout
    text = " ".join(re.sub(r"\s+#.*$", "", ln) for ln in block.body)
    flags = set(re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", text))
    assert flags, block.where()
    unknown = sorted(f for f in flags if not re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", proc.stdout))
    assert not unknown, f"{block.where()}: `desched {m.group(1)} --help` lists no {unknown}"


def test_readme_quotes_real_output() -> None:
    """README.md and docs/policy.md show a real validation error as a console transcript, so that
    test_offline_command_prints_what_the_docs_show runs it and compares the line."""
    for doc in (ROOT / "README.md", ROOT / "docs" / "policy.md"):
        shown = [
            c
            for b in blocks(doc)
            if is_transcript(b)
            for c in commands_of(b)
            if c.text.startswith("desched validate ")
            and c.shown
            and c.shown[-1].startswith("desched: error: ")
        ]
        assert shown, f"{doc.relative_to(ROOT)} no longer shows a validation error"
        for c in shown:
            proc = run_desched(c.text)
            assert proc.returncode == 2
            assert proc.stdout.strip() == c.shown[-1]


# Log lines the docs show (docs/operations.md) are illustrations of `desched run`'s output, which
# needs a cluster. Each is checked here: its message is one its file logs, and a line with the same
# values rendered by desched's own formatter and field builders is the line shown, but for the
# time, the process id and the line number of the logging call (normalised away).
KLOG = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ (\w+\.py):\d+\] (.*)$")


@dataclass(frozen=True)
class LogSample:
    where: str
    line: str
    json: bool
    file: str
    msg: str


def log_samples() -> list[LogSample]:
    out: list[LogSample] = []
    for b in ALL_BLOCKS:
        for ln in b.body:
            if b.lang == "text" and (m := KLOG.match(ln)):
                msg = re.split(r" \w+=", m.group(3), maxsplit=1)[0]
                out.append(LogSample(b.where(), ln, False, m.group(2), msg))
            elif b.lang == "json" and ln.startswith('{"ts":'):
                doc = json.loads(ln)
                out.append(LogSample(b.where(), ln, True, doc["caller"].split(":")[0], doc["msg"]))
    return out


LOG_SAMPLES = log_samples()


def render(sample: LogSample, fields: dict[str, Any]) -> str:
    record = logging.LogRecord(
        f"desched.{sample.file[:-3]}", logs.level_for(0), sample.file, 1, sample.msg, (), None
    )
    record.__dict__.update(fields)
    formatter = logs.JsonFormatter() if sample.json else logs.KlogTextFormatter()
    return formatter.format(record)


def normalised(line: str, json_line: bool) -> str:
    if json_line:
        doc = json.loads(line)
        doc.pop("ts")
        doc["caller"] = doc["caller"].split(":")[0]
        return json.dumps(doc)
    m = KLOG.match(line)
    assert m is not None, line
    return f"{m.group(1)} {m.group(2)}] {m.group(3)}"


def test_the_docs_show_log_lines() -> None:
    assert {s.msg for s in LOG_SAMPLES} >= {"would evict", "cycle done"}, LOG_SAMPLES


@pytest.mark.parametrize("sample", LOG_SAMPLES, ids=[f"{s.where}:{s.msg}" for s in LOG_SAMPLES])
def test_log_sample_is_what_desched_logs(sample: LogSample) -> None:
    sources = list((ROOT / "src" / "desched").rglob(sample.file))
    assert len(sources) == 1, f"{sample.where}: no single src file {sample.file}"
    assert f'"{sample.msg}"' in sources[0].read_text(), (
        f"{sample.where}: {sample.file} never logs {sample.msg!r}"
    )
    if sample.json:
        shown: dict[str, Any] = json.loads(sample.line)
    else:
        m = KLOG.match(sample.line)
        assert m is not None
        shown = {k: v.strip('"') for k, v in re.findall(r'(\w+)=("[^"]*"|\S+)', m.group(3))}
    if sample.msg in ("would evict", "evicted"):
        ns, name = str(shown["pod"]).split("/")
        record = SimpleNamespace(
            namespace=ns, name=name, node=shown["node"], profile=shown["profile"], plugin=shown["plugin"]
        )
        fields = logs.eviction_fields(SimpleNamespace(**vars(record), reason=shown["reason"]))
    elif sample.msg == "cycle done":
        result = SimpleNamespace(
            nodes=int(shown["nodes"]),
            evictions=[None] * int(shown["evicted"]),
            failures=[None] * int(shown["refused"]),
            unknown=[None] * int(shown["unknown"]),
            skips=[None] * int(shown["evictionsSkipped"]),
            seconds=float(shown["seconds"]),
        )
        fields = logs.cycle_fields(
            int(shown["cycle"]), int(shown["pods"]), result, dry_run=str(shown["dryRun"]) == "true"
        )
    else:
        return  # a finding's line (framework/findings.py): its fields are checked by test_logging_explain
    assert normalised(render(sample, fields), sample.json) == normalised(sample.line, sample.json)
