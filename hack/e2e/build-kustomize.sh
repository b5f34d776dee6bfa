#!/usr/bin/env bash
# Build kustomize from the Go module proxy (sigs.k8s.io/kustomize/kustomize/v5), for the e2e test
# that renders the kustomize bases in deploy/kubernetes and runs what they ship
# (tests/e2e/test_as_shipped.py). Cached like helm: a second run prints the cached path at once.
# The last line of stdout is the binary's path.
set -euo pipefail

# v5.7.1, not the newest (v5.8.3), which needs go >= 1.27 (the machine has Go 1.26, GOTOOLCHAIN=local)
KUSTOMIZE_VERSION="${DESCHED_E2E_KUSTOMIZE_VERSION:-v5.7.1}"
CACHE_ROOT="${DESCHED_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/desched/e2e}"
CACHE_ROOT="$(mkdir -p "${CACHE_ROOT}" && cd "${CACHE_ROOT}" && pwd)"
OUT="${CACHE_ROOT}/tools/kustomize-${KUSTOMIZE_VERSION}"

if [[ -x "${OUT}/kustomize" ]]; then
  echo "${OUT}/kustomize"
  exit 0
fi

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off
export GOMODCACHE="${DESCHED_E2E_GOMODCACHE:-${CACHE_ROOT}/go/mod}"
export GOCACHE="${DESCHED_E2E_GOCACHE:-${CACHE_ROOT}/go/build}"
export GOFLAGS="-modcacherw -buildvcs=false"
mkdir -p "${OUT}.tmp"
start=$(date +%s)
echo "[build-kustomize] building sigs.k8s.io/kustomize/kustomize/v5@${KUSTOMIZE_VERSION} (a minute or two, once)" >&2
GOBIN="${OUT}.tmp" "${GO}" install -trimpath -ldflags="-s -w" "sigs.k8s.io/kustomize/kustomize/v5@${KUSTOMIZE_VERSION}" >&2
rm -rf "${OUT}"
mv "${OUT}.tmp" "${OUT}"
echo "[build-kustomize] done in $(( $(date +%s) - start ))s" >&2
echo "${OUT}/kustomize"
