#!/usr/bin/env bash
# Package the Helm chart for a release: its default image becomes the one the release pushes.
#   hack/release/package-chart.sh IMAGE_REPOSITORY VERSION OUTDIR
# e.g. hack/release/package-chart.sh ghcr.io/acme/desched 0.1.0 dist/ -> dist/desched-0.1.0.tgz,
# whose image.repository defaults to ghcr.io/acme/desched (the placeholder ghcr.io/your-org/desched
# in deploy/helm/desched/values.yaml and in the helper that replaces upstream's image) and whose
# version and appVersion are VERSION. .github/workflows/release.yml runs it;
# tests/unit/deploy/test_release.py runs it too. Needs helm on PATH (or $HELM).
set -euo pipefail

if [[ $# -ne 3 ]]; then
  echo "usage: $0 IMAGE_REPOSITORY VERSION OUTDIR" >&2
  exit 2
fi
repository=$1 version=$2 outdir=$3
HELM="${HELM:-helm}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
placeholder="ghcr.io/your-org/desched"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
cp -r "${root}/deploy/helm/desched" "${work}/desched"
for file in values.yaml templates/_helpers.tpl; do
  grep -q "${placeholder}" "${work}/desched/${file}" || {
    echo "$0: ${file} does not name ${placeholder}" >&2
    exit 1
  }
  sed -i "s|${placeholder}|${repository}|g" "${work}/desched/${file}"
done
mkdir -p "${outdir}"
"${HELM}" lint --strict "${work}/desched" >&2
"${HELM}" package "${work}/desched" --version "${version}" --app-version "${version}" --destination "${outdir}"
