#!/usr/bin/env bash
# Regenerate the container image's dependency locks (exact versions and sha256 hashes) from
# pyproject.toml: deploy/requirements.lock (desched's runtime dependencies) and
# deploy/build-requirements.lock (the build backend that builds desched's wheel). deploy/Dockerfile
# installs them with `pip install --require-hashes`; tests/unit/deploy checks that the lock
# covers every runtime dependency of pyproject.toml. Uses uv (https://docs.astral.sh/uv/) from
# $UV or PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
UV="${UV:-$(command -v uv || true)}"
if [[ -z "${UV}" ]]; then
  echo "uv not found: pip install uv (or set UV=/path/to/uv)" >&2
  exit 1
fi
common=(--generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28
        --annotation-style line --custom-compile-command "bash hack/update-requirements-lock.sh")
"${UV}" pip compile pyproject.toml "${common[@]}" -o deploy/requirements.lock
# the [build-system] requirement of pyproject.toml
python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))' \
  | "${UV}" pip compile - "${common[@]}" -o deploy/build-requirements.lock
