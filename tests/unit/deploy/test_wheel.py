"""The wheel and sdist (`python -m build`), installed into a fresh venv: `desched version` and
`desched simulate` on the bundled example run from the installed wheel, and print what the
checkout's desched prints.

`python -m build` builds the sdist, then the wheel from the sdist, so a file the sdist leaves out
fails here too. The fresh venv installs the wheel's dependencies from the package index (as a user
does), so this test needs it, and takes about a minute.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
SIMULATE = [
    "simulate",
    str(ROOT / "examples" / "cluster.yaml"),
    "--policy",
    str(ROOT / "examples" / "policy.yaml"),
    "--now",
    "2026-11-21T12:00:00Z",
]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=120)
    (wheel,) = dist.glob("desched-*.whl")
    proc = subprocess.run(
        [str(where / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return where


def test_build_makes_a_wheel_and_an_sdist_of_this_version(dist: Path) -> None:
    names = sorted(p.name for p in dist.iterdir())
    assert names == [f"desched-{VERSION}-py3-none-any.whl", f"desched-{VERSION}.tar.gz"], names
    with tarfile.open(dist / f"desched-{VERSION}.tar.gz") as sdist:
        members = {m.split("/", 1)[1] for m in sdist.getnames() if "/" in m}
    assert {
        "pyproject.toml",
        "README.md",
        "LICENSE",
        "src/desched/__init__.py",
        "src/desched/py.typed",
    } <= members
    with zipfile.ZipFile(dist / f"desched-{VERSION}-py3-none-any.whl") as wheel:
        files = set(wheel.namelist())
        entry_points = wheel.read(f"desched-{VERSION}.dist-info/entry_points.txt").decode()
    assert "desched/py.typed" in files and "desched/cli/__init__.py" in files
    assert "desched/cli/flags.py" in files  # the subpackages too (the flag table)
    assert not [f for f in files if f.startswith(("tests/", "benchmarks/"))]
    assert "desched = desched.cli:main" in entry_points


def test_the_installed_wheel_runs_version_and_simulate(venv: Path, tmp_path: Path) -> None:
    desched = venv / "bin" / "desched"
    # the wheel's code, not the checkout's: run away from the checkout, and ask where it comes from
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import desched; print(desched.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout.strip()
    assert where.startswith(str(venv)), where

    version = subprocess.run(
        [str(desched), "version"], capture_output=True, text=True, check=False, cwd=tmp_path
    )
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith(f"desched {VERSION}"), version.stdout

    installed = subprocess.run(
        [str(desched), *SIMULATE], capture_output=True, text=True, check=False, cwd=tmp_path
    )
    assert installed.returncode == 0, installed.stderr
    assert "Simulated one descheduling cycle at 2026-11-21T12:00:00Z over 7 ready nodes." in installed.stdout
    checkout = subprocess.run(
        [str(Path(sys.executable).parent / "desched"), *SIMULATE],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert installed.stdout == checkout.stdout
