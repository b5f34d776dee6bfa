#!/usr/bin/env bash
# Build hack/upstream-diff (upstream descheduler sigs.k8s.io/descheduler v0.36.0 running one cycle
# on a snapshot, the oracle of tests/differential) from the Go module proxy, cached beside the e2e
# control plane: <cache>/tools/upstream-diff-<hash>/upstream-diff, where <hash> is the sha256 of
# the program's sources (main.go, go.mod, go.sum) and of this script, so an edit rebuilds and an
# unchanged program is reused at once. The last line of stdout is the binary's path; progress
# goes to stderr.
#
# Environment: DESCHED_E2E_CACHE, DESCHED_E2E_GOMODCACHE, DESCHED_E2E_GOCACHE as for
# hack/e2e/build-control-plane.sh (the same module and build caches: the k8s.io modules are shared).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
SRC="$(cd "${HERE}/../upstream-diff" && pwd)"
CACHE_ROOT="${DESCHED_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/desched/e2e}"
CACHE_ROOT="$(mkdir -p "${CACHE_ROOT}" && cd "${CACHE_ROOT}" && pwd)"
HASH="$(cat "${SRC}/main.go" "${SRC}/go.mod" "${SRC}/go.sum" "${HERE}/build-upstream-diff.sh" | sha256sum | cut -c1-16)"
OUT="${CACHE_ROOT}/tools/upstream-diff-${HASH}"

if [[ -x "${OUT}/upstream-diff" ]]; then
  echo "${OUT}/upstream-diff"
  exit 0
fi

mkdir -p "${CACHE_ROOT}/tools"
exec 9>"${CACHE_ROOT}/tools/.upstream-diff.lock"
flock 9
if [[ -x "${OUT}/upstream-diff" ]]; then
  echo "${OUT}/upstream-diff"
  exit 0
fi

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
[[ -x "${GO}" ]] || { echo "[build-upstream-diff] go toolchain not found (set GO=/path/to/go)" >&2; exit 1; }
export GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off
export GOMODCACHE="${DESCHED_E2E_GOMODCACHE:-${CACHE_ROOT}/go/mod}"
export GOCACHE="${DESCHED_E2E_GOCACHE:-${CACHE_ROOT}/go/build}"
export GOFLAGS="-mod=mod -modcacherw -buildvcs=false"
unset GOOS GOARCH GOBIN 2>/dev/null || true

# Build from a copy, so that -mod=mod never rewrites the checked-in go.mod/go.sum.
WORK="$(mktemp -d)"
trap 'rm -rf "${WORK}"' EXIT
cp "${SRC}/main.go" "${SRC}/go.mod" "${SRC}/go.sum" "${WORK}/"
start=$(date +%s)
echo "[build-upstream-diff] building sigs.k8s.io/descheduler v0.36.0 runner ($(nproc) cores; a few minutes, once)" >&2
mkdir -p "${OUT}.tmp"
(cd "${WORK}" && "${GO}" build -trimpath -ldflags="-s -w" -o "${OUT}.tmp/upstream-diff" .) >&2
rm -rf "${OUT}"
mv "${OUT}.tmp" "${OUT}"
echo "[build-upstream-diff] done in $(( $(date +%s) - start ))s: ${OUT}" >&2
echo "${OUT}/upstream-diff"
