#!/usr/bin/env bash
# Build helm from the Go module proxy (helm.sh/helm/v3), for the e2e test that renders the chart
# in deploy/helm and has the apiserver validate every object it produces. Cached like the control
# plane: a second run prints the cached path at once. The last line of stdout is the binary's path.
set -euo pipefail

HELM_VERSION="${DESCHED_E2E_HELM_VERSION:-v3.19.0}"
CACHE_ROOT="${DESCHED_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/desched/e2e}"
CACHE_ROOT="$(mkdir -p "${CACHE_ROOT}" && cd "${CACHE_ROOT}" && pwd)"
OUT="${CACHE_ROOT}/tools/helm-${HELM_VERSION}"

if [[ -x "${OUT}/helm" ]]; then
  echo "${OUT}/helm"
  exit 0
fi

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off
export GOMODCACHE="${DESCHED_E2E_GOMODCACHE:-${CACHE_ROOT}/go/mod}"
export GOCACHE="${DESCHED_E2E_GOCACHE:-${CACHE_ROOT}/go/build}"
export GOFLAGS="-modcacherw -buildvcs=false"
mkdir -p "${OUT}.tmp"
start=$(date +%s)
echo "[build-helm] building helm.sh/helm/v3/cmd/helm@${HELM_VERSION} (a few minutes, once)" >&2
GOBIN="${OUT}.tmp" "${GO}" install -trimpath -ldflags="-s -w" "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}" >&2
rm -rf "${OUT}"
mv "${OUT}.tmp" "${OUT}"
echo "[build-helm] done in $(( $(date +%s) - start ))s" >&2
echo "${OUT}/helm"
