#!/usr/bin/env bash
# promtool, for the test that runs the chart's PrometheusRule with `promtool test rules`
# (tests/unit/deploy/test_alerts.py). Cached like helm: a second run prints the cached path at once.
# The last line of stdout is the binary's path.
#
# Where apt-get can fetch Debian's `prometheus` package, promtool is taken out of the .deb (not
# installed: the package would pull in a Prometheus server, node-exporter and 35 more packages);
# otherwise it is built from the Go module proxy (github.com/prometheus/prometheus/cmd/promtool).
set -euo pipefail

PROMETHEUS_GO_VERSION="${DESCHED_PROMTOOL_GO_VERSION:-v0.316.0}"  # the module version of a Prometheus 3 release (go 1.26)
CACHE_ROOT="${DESCHED_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/desched/e2e}"
CACHE_ROOT="$(mkdir -p "${CACHE_ROOT}" && cd "${CACHE_ROOT}" && pwd)"
OUT="${CACHE_ROOT}/tools/promtool"

if [[ -x "${OUT}/promtool" ]]; then
  echo "${OUT}/promtool"
  exit 0
fi

rm -rf "${OUT}.tmp"
mkdir -p "${OUT}.tmp"
start=$(date +%s)
if command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null \
    && (cd "${OUT}.tmp" && apt-get download prometheus >&2 2>/dev/null || \
        { [[ "$(id -u)" == 0 ]] && apt-get update -qq >&2 && apt-get download prometheus >&2; }); then
  echo "[build-promtool] promtool from Debian's prometheus package" >&2
  dpkg-deb -x "${OUT}.tmp"/prometheus_*.deb "${OUT}.tmp/deb"
  cp "${OUT}.tmp/deb/usr/bin/promtool" "${OUT}.tmp/promtool"
  rm -rf "${OUT}.tmp/deb" "${OUT}.tmp"/prometheus_*.deb
else
  GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
  export GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off
  export GOMODCACHE="${DESCHED_E2E_GOMODCACHE:-${CACHE_ROOT}/go/mod}"
  export GOCACHE="${DESCHED_E2E_GOCACHE:-${CACHE_ROOT}/go/build}"
  export GOFLAGS="-modcacherw -buildvcs=false"
  echo "[build-promtool] building github.com/prometheus/prometheus/cmd/promtool@${PROMETHEUS_GO_VERSION} (a few minutes, once)" >&2
  GOBIN="${OUT}.tmp" "${GO}" install -trimpath -ldflags="-s -w" \
    "github.com/prometheus/prometheus/cmd/promtool@${PROMETHEUS_GO_VERSION}" >&2
fi
"${OUT}.tmp/promtool" --version >&2
rm -rf "${OUT}"
mv "${OUT}.tmp" "${OUT}"
echo "[build-promtool] done in $(( $(date +%s) - start ))s" >&2
echo "${OUT}/promtool"
