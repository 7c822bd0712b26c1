#!/usr/bin/env bash
# Installs the pallas backend's Python environment (jax, jaxlib, libtpu: pinned in
# tpu_runner/pallas/requirements.txt) into a venv under the build folder and prints its path.
# About 1 GB, mostly libtpu; made once, then reused (pip checks the pins and stops).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${KERNELGYM_BUILD_DIR:-build}
VENV="$BUILD_DIR/pallas-venv"
REQUIREMENTS=tpu_runner/pallas/requirements.txt
STAMP="$VENV/.requirements"
if [[ -x "$VENV/bin/python" ]] && cmp -s "$REQUIREMENTS" "$STAMP"; then
  echo "$VENV"
  exit 0
fi
source scripts/pip_scratch.sh
[[ -x "$VENV/bin/python" ]] || /usr/bin/python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQUIREMENTS" >&2
cp "$REQUIREMENTS" "$STAMP"
echo "$VENV"
