#!/usr/bin/env bash
# Build the binaries of a real Kubernetes control plane for desched's e2e tests,
# from the Go module proxy only (no GitHub downloads, no docker):
#
#   kube-apiserver, kube-scheduler, kube-controller-manager  <- k8s.io/kubernetes ${K8S_VERSION}
#   etcd                                                     <- go.etcd.io/etcd/server/v3, at the
#                                                               version k8s.io/kubernetes requires
#   kwok                                                     <- sigs.k8s.io/kwok/cmd/kwok ${KWOK_VERSION}
#   kwok-stages.yaml  kwok's default Stage objects (as kwokctl uses), from the same kwok module
#
# Output: ${DESCHED_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/desched/e2e}/<k8s-version>/bin/
# The script is idempotent: when the stamp file in that bin dir matches this recipe, it prints the
# bin dir and exits at once. The last line of stdout is always the bin dir (progress goes to stderr).
#
# Environment:
#   DESCHED_E2E_CACHE         cache root (default ~/.cache/desched/e2e)
#   DESCHED_E2E_K8S_VERSION   k8s.io/kubernetes release (default below)
#   DESCHED_E2E_KWOK_VERSION  sigs.k8s.io/kwok release (default below)
#   DESCHED_E2E_REBUILD=1     ignore the stamp and rebuild
#   DESCHED_E2E_PRUNE_GOCACHE=1  delete the Go build cache after a successful build (saves ~GBs;
#                             a rebuild then recompiles from scratch, modules stay cached)
set -euo pipefail

# Pinned versions. Both need a `go` directive <= the local toolchain (Go 1.26.x here):
# k8s.io/kubernetes v1.36.3 and sigs.k8s.io/kwok v0.8.0 both declare `go 1.26.0`.
K8S_VERSION="${DESCHED_E2E_K8S_VERSION:-v1.36.3}"
KWOK_VERSION="${DESCHED_E2E_KWOK_VERSION:-v0.8.0}"
# Bump when the way the binaries are built changes, so old stamps are invalidated.
RECIPE=4

CACHE_ROOT="${DESCHED_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/desched/e2e}"
mkdir -p "${CACHE_ROOT}"
CACHE_ROOT="$(cd "${CACHE_ROOT}" && pwd)"  # absolute: Go wants absolute GOMODCACHE/GOCACHE
OUT_DIR="${CACHE_ROOT}/${K8S_VERSION}"
BIN_DIR="${OUT_DIR}/bin"
STAMP="${BIN_DIR}/.stamp"
BINARIES=(kube-apiserver kube-scheduler kube-controller-manager etcd kwok)
WANT_STAMP="recipe=${RECIPE} k8s=${K8S_VERSION} kwok=${KWOK_VERSION}"

log() { printf '[build-control-plane] %s\n' "$*" >&2; }

stamp_ok() {
  [[ -f "${STAMP}" ]] || return 1
  [[ "$(head -n1 "${STAMP}")" == "${WANT_STAMP}" ]] || return 1
  local b
  for b in "${BINARIES[@]}"; do
    [[ -x "${BIN_DIR}/${b}" ]] || return 1
  done
  [[ -s "${BIN_DIR}/kwok-stages.yaml" ]] || return 1
}

if [[ "${DESCHED_E2E_REBUILD:-0}" != 1 ]] && stamp_ok; then
  log "cached: ${BIN_DIR} ($(head -n1 "${STAMP}"))"
  echo "${BIN_DIR}"
  exit 0
fi

mkdir -p "${OUT_DIR}"
# Serialise concurrent builds (parallel CI jobs, pytest-xdist workers) on the same cache.
exec 9>"${OUT_DIR}/.lock"
if ! flock -n 9; then
  log "another build holds ${OUT_DIR}/.lock; waiting for it"
  flock 9
fi
if [[ "${DESCHED_E2E_REBUILD:-0}" != 1 ]] && stamp_ok; then
  log "cached (built by a concurrent run): ${BIN_DIR}"
  echo "${BIN_DIR}"
  exit 0
fi

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
[[ -x "${GO}" ]] || { log "go toolchain not found (set GO=/path/to/go)"; exit 1; }

# Go environment: the local toolchain only (nothing can download another one), static binaries,
# and module/build caches inside the cache root so a later run on this machine reuses them.
export GOTOOLCHAIN=local
export CGO_ENABLED=0
export GOMODCACHE="${DESCHED_E2E_GOMODCACHE:-${CACHE_ROOT}/go/mod}"
export GOCACHE="${DESCHED_E2E_GOCACHE:-${CACHE_ROOT}/go/build}"
# -modcacherw: the module cache stays deletable with plain `rm -rf`.
export GOFLAGS="-modcacherw -buildvcs=false"
export GOWORK=off
unset GOOS GOARCH GOBIN 2>/dev/null || true

log "go: $("${GO}" version); k8s ${K8S_VERSION}; kwok ${KWOK_VERSION}; cache ${CACHE_ROOT}; $(nproc) cores"

TIMINGS=()
step() { # step NAME CMD...: run CMD, print and remember how long it took
  local name="$1"; shift
  local t0 t1
  t0=$(date +%s)
  log "step ${name}: start"
  "$@"
  t1=$(date +%s)
  log "step ${name}: done in $((t1 - t0))s"
  TIMINGS+=("${name}=$((t1 - t0))s")
}
T_START=$(date +%s)

# Staging modules are published as v0.<minor>.<patch> for k8s v1.<minor>.<patch>.
STAGING_VERSION="v0.${K8S_VERSION#v1.}"
BUILD_DIR="${OUT_DIR}/build"
STAGE_BIN="${OUT_DIR}/bin.new"
rm -rf "${STAGE_BIN}"
mkdir -p "${BUILD_DIR}" "${STAGE_BIN}"

gen_module() {
  # k8s.io/kubernetes' go.mod replaces every k8s.io/* staging module with ./staging/src/...,
  # which a module download does not contain. Generate a consumer module that requires
  # k8s.io/kubernetes and replaces each of those with the published v0.X.Y instead. The list is
  # derived from the kubernetes go.mod itself, so it stays correct for other versions.
  local modfile
  modfile="$(cd "${BUILD_DIR}" && "${GO}" mod download -json "k8s.io/kubernetes@${K8S_VERSION}" \
    | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(d["Error"]) if d.get("Error") else print(d["GoMod"])')"
  local go_directive
  go_directive="$(awk '$1=="go"{print $2; exit}' "${modfile}")"
  log "k8s.io/kubernetes ${K8S_VERSION} go.mod: go ${go_directive}"
  {
    echo "// Generated by hack/e2e/build-control-plane.sh; do not edit."
    echo "module desched.local/e2e-control-plane"
    echo
    echo "go ${go_directive}"
    # Same runtime GODEBUG defaults kubernetes builds with (godebug lines of its go.mod).
    grep -E '^godebug ' "${modfile}" || true
    echo
    echo "require k8s.io/kubernetes ${K8S_VERSION}"
    echo
    echo "replace ("
    "${GO}" mod edit -json "${modfile}" | python3 -c '
import json, sys
staging = sys.argv[1]
for r in json.load(sys.stdin).get("Replace") or []:
    new = r["New"]["Path"]
    if new.startswith("./staging/") or new.startswith("staging/"):
        print("\t%s => %s %s" % (r["Old"]["Path"], r["Old"]["Path"], staging))
' "${STAGING_VERSION}"
    echo ")"
  } > "${BUILD_DIR}/go.mod.tmp"
  mv "${BUILD_DIR}/go.mod.tmp" "${BUILD_DIR}/go.mod"
  local n
  n=$(grep -c '=> k8s.io/' "${BUILD_DIR}/go.mod" || true)
  log "generated ${BUILD_DIR}/go.mod with ${n} staging replaces -> ${STAGING_VERSION}"
  [[ "${n}" -gt 10 ]] || { log "suspiciously few staging replaces (${n})"; exit 1; }
}

K8S_PKGS=(
  k8s.io/kubernetes/cmd/kube-apiserver
  k8s.io/kubernetes/cmd/kube-scheduler
  k8s.io/kubernetes/cmd/kube-controller-manager
)
ETCD_PKG=go.etcd.io/etcd/server/v3   # package main of the etcd server binary

resolve() {
  # Download the modules these packages need and record their checksums (go.sum).
  (cd "${BUILD_DIR}" && "${GO}" list -mod=mod -deps "${K8S_PKGS[@]}" "${ETCD_PKG}" >/dev/null)
}

# Version stamping like kubernetes' hack/lib/version.sh, so the apiserver reports v1.X.Y.
K8S_MINOR="${K8S_VERSION#v1.}"; K8S_MINOR="${K8S_MINOR%%.*}"
K8S_LDFLAGS=""
set_k8s_ldflags() { # after resolve: buildDate = the release's commit time, for reproducible builds
  local date pkg
  date="$(cd "${BUILD_DIR}" && "${GO}" list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)"
  K8S_LDFLAGS="-s -w"
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    K8S_LDFLAGS+=" -X ${pkg}.gitVersion=${K8S_VERSION} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${K8S_MINOR}"
    K8S_LDFLAGS+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=${date}"
  done
}
# Same tags and flags as kubernetes' own non-debug builds (hack/lib/golang.sh).
K8S_BUILD_FLAGS=(-trimpath -tags=selinux,notest,grpcnotrace)

build_k8s() { # build_k8s PKG: one binary into the staging bin dir
  (cd "${BUILD_DIR}" && "${GO}" build "${K8S_BUILD_FLAGS[@]}" -ldflags="${K8S_LDFLAGS}" \
    -o "${STAGE_BIN}/$(basename "$1")" "$1")
}

build_etcd() {
  # etcd's own go.mod has replace directives, so `go install go.etcd.io/etcd/server/v3@vX` is
  # refused; building it inside the kubernetes consumer module works, gives exactly the etcd
  # version kubernetes is tested with, and reuses the packages already compiled for the apiserver.
  (cd "${BUILD_DIR}" && "${GO}" build -trimpath -ldflags="-s -w" -o "${STAGE_BIN}/etcd" "${ETCD_PKG}")
}

build_kwok() {
  # kwok's go.mod has no replace directives: a plain `go install pkg@version` works.
  (cd "${BUILD_DIR}" && GOBIN="${STAGE_BIN}" GOFLAGS="-modcacherw -buildvcs=false" \
    "${GO}" install -trimpath -ldflags="-s -w" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}")
  # kwok simulates nothing without Stage objects, and its binary embeds none: kwokctl passes
  # these defaults (node-initialize, node-heartbeat-with-lease, pod-ready/complete/delete).
  # Ship the same ones, from the very kwok module version, next to the binary.
  local src="${GOMODCACHE}/sigs.k8s.io/kwok@${KWOK_VERSION}/kustomize/stage" f
  local stages=(
    node/fast/node-initialize.yaml
    node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
    pod/fast/pod-ready.yaml
    pod/fast/pod-complete.yaml
    pod/fast/pod-delete.yaml
  )
  {
    echo "# kwok default stages from sigs.k8s.io/kwok@${KWOK_VERSION}/kustomize/stage (as kwokctl uses)"
    for f in "${stages[@]}"; do
      echo "---"
      echo "# ${f}"
      cat "${src}/${f}"
    done
  } > "${STAGE_BIN}/kwok-stages.yaml"
}

step generate-go.mod gen_module
step resolve-modules resolve
set_k8s_ldflags
ETCD_VERSION="$(cd "${BUILD_DIR}" && "${GO}" list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
log "etcd: go.etcd.io/etcd/server/v3 ${ETCD_VERSION} (selected by k8s.io/kubernetes ${K8S_VERSION})"

step kube-apiserver build_k8s k8s.io/kubernetes/cmd/kube-apiserver
step kube-scheduler build_k8s k8s.io/kubernetes/cmd/kube-scheduler
step kube-controller-manager build_k8s k8s.io/kubernetes/cmd/kube-controller-manager
step etcd build_etcd
step kwok build_kwok

# Sanity: every binary runs.
"${STAGE_BIN}/kube-apiserver" --version >&2
"${STAGE_BIN}/etcd" --version >&2
"${STAGE_BIN}/kwok" --version >&2

T_END=$(date +%s)
{
  echo "${WANT_STAMP}"
  echo "etcd=${ETCD_VERSION}"
  echo "go=$("${GO}" env GOVERSION)"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "timings: ${TIMINGS[*]} total=$((T_END - T_START))s"
} > "${STAGE_BIN}/.stamp"
rm -rf "${BIN_DIR}"
mv "${STAGE_BIN}" "${BIN_DIR}"

if [[ "${DESCHED_E2E_PRUNE_GOCACHE:-0}" == 1 ]]; then
  log "pruning Go build cache ${GOCACHE}"
  "${GO}" clean -cache || true
fi

log "timings: ${TIMINGS[*]} total=$((T_END - T_START))s"
log "binaries in ${BIN_DIR}"
echo "${BIN_DIR}"
