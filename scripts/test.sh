#!/usr/bin/env bash
# The test command README.md gives: installs what the tests need, builds (or reuses the cached)
# e2e control plane, then runs every suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test,report]"

# kube-apiserver, kube-scheduler, etcd and kwok for the e2e tests: built once from the Go module
# proxy, then reused from the user cache (see docs/testing.md).
DESCHED_E2E_BIN=$(bash hack/e2e/build-control-plane.sh | tail -n 1)
export DESCHED_E2E_BIN
# helm, to render deploy/helm in the e2e tests (also built once, then cached)
DESCHED_HELM=$(bash hack/e2e/build-helm.sh | tail -n 1)
export DESCHED_HELM
# kustomize, to build deploy/kubernetes in the as-shipped e2e tests (also built once, then cached)
DESCHED_KUSTOMIZE=$(bash hack/e2e/build-kustomize.sh | tail -n 1)
export DESCHED_KUSTOMIZE
# promtool, to run the chart's alerts with `promtool test rules` (taken from Debian's prometheus
# package, or built from the Go module proxy; cached)
DESCHED_PROMTOOL=$(bash hack/e2e/build-promtool.sh | tail -n 1)
export DESCHED_PROMTOOL
# actionlint, for the release workflow (tests/unit/deploy/test_release.py and .ci/run)
DESCHED_ACTIONLINT=$(bash hack/e2e/build-actionlint.sh | tail -n 1)
export DESCHED_ACTIONLINT

# upstream descheduler v0.36.0 run on snapshots, the oracle of tests/differential (also built once
# from the Go module proxy, then cached beside the control plane, keyed by its sources' hash)
DESCHED_UPSTREAM_DIFF=$(bash hack/e2e/build-upstream-diff.sh | tail -n 1)
export DESCHED_UPSTREAM_DIFF
# chromium, to load the HTML report headless (tests/unit/report/test_report_browser.py): Debian's
# package, installed when missing and this runs as root; otherwise those tests skip, saying why.
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
  else
    echo "test.sh: chromium is not installed and this is not root: the report's browser tests will skip" >&2
  fi
fi

.venv/bin/python -m pytest "$@"
