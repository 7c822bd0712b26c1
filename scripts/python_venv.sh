#!/usr/bin/env bash
# Installs the Python package (python/) into a venv of its own under the build folder and prints
# the venv's path. Made once, then reused: after the first run pip needs the network only when a
# dependency changes. Debian's python3, whatever else is on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${KERNELGYM_BUILD_DIR:-build}
VENV="$BUILD_DIR/python-venv"
if ! "$VENV/bin/python" -c "import hatchling" 2>/dev/null; then
  [[ -x "$VENV/bin/python" ]] || /usr/bin/python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "hatchling>=1.18" >&2  # python/'s build backend
fi
"$VENV/bin/pip" install --quiet --disable-pip-version-check --no-build-isolation "./python[test]" >&2
# openenv-core for the OpenEnv adapter's tests, without its dependencies: its runtime is in [test];
# the rest (gradio for its web UI, LLM clients for its CLI) the adapter never imports.
if ! "$VENV/bin/python" -c "import openenv.core.env_server" 2>/dev/null; then
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps "openenv-core==0.3.0" >&2
fi
echo "$VENV"
