"""Fixtures of the e2e tier: a real Kubernetes control plane (see docs/testing.md).

``control_plane`` (session scope) is a :class:`tests.e2e.controlplane.ControlPlane` started from
binaries that ``hack/e2e/build-control-plane.sh`` builds once per machine (cached). If it cannot
start, every e2e test errors: the tier never skips silently.

To run the tier against an existing cluster instead, set ``KUBECONFIG`` and
``DESCHED_E2E_USE_KUBECONFIG=1``; the fixture then yields an :class:`ExternalCluster`, which has
``kubeconfig`` but none of the process-control methods (tests needing those should check
``control_plane.external`` and skip).

Every test collected under tests/e2e gets the ``e2e`` marker (registered in pyproject.toml), so
``pytest -m "not e2e"`` leaves the tier out.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.controlplane import ControlPlane

E2E_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class ExternalCluster:
    """An existing cluster, reached through ``$KUBECONFIG``."""

    kubeconfig: Path
    external: bool = True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # This hook sees the items of the whole session: mark only ours.
    for item in items:
        if E2E_DIR in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.e2e)


def use_external_cluster() -> bool:
    return bool(os.environ.get("KUBECONFIG")) and os.environ.get("DESCHED_E2E_USE_KUBECONFIG") == "1"


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane | ExternalCluster]:
    if use_external_cluster():
        path = Path(os.environ["KUBECONFIG"].split(os.pathsep)[0])
        if not path.is_file():
            pytest.fail(f"DESCHED_E2E_USE_KUBECONFIG=1 but KUBECONFIG={path} is not a file", pytrace=False)
        yield ExternalCluster(kubeconfig=path)
        return

    cp = ControlPlane()
    try:
        cp.start()
    except Exception as e:  # fail loudly, never skip: the tier must not pass by not running
        pytest.fail(f"the e2e control plane did not start: {e}", pytrace=False)
    try:
        yield cp
    finally:
        failed = request.session.testsfailed > 0
        cp.stop(keep_logs=failed)
        if failed or cp.keep_workdir:
            reporter = request.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(f"e2e control plane logs kept in {cp.workdir}")
