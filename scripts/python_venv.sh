#!/usr/bin/env bash
# Installs the Python package (python/) into a venv of its own under the build folder and prints
# the venv's path. Made once, then reused: after the first run pip needs the network only when a
# dependency changes. Debian's python3, whatever else is on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${KERNELGYM_BUILD_DIR:-build}
VENV="$BUILD_DIR/python-venv"
source scripts/pip_scratch.sh
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
# verifiers (prime-rl's environment format) for the verifiers adapter's tests: the package without
# its dependencies, then only what `import verifiers.v1` loads (about 200 MB, most of it sympy via
# math-verify, and the openai and anthropic SDKs); not its sandboxes' clients, harbor, gepa or uv.
if ! "$VENV/bin/python" -c "import verifiers.v1" 2>/dev/null; then
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps "verifiers==0.4.0" >&2
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "prime-pydantic-config[toml]==0.4.3" \
    "renderers==0.1.12" "openai==2.54.0" "anthropic==2.16.0" "prime-sandboxes==0.5.1" "math-verify==0.9.0" \
    "aiohttp>=3.14.1" "tomli-w>=1.0" "tenacity>=8.5" >&2
fi
# The trainers the adapters are written against, for the trainer smoke tests
# (python/tests/test_trainers.py: TRL's GRPOTrainer and verifiers' evaluation on a tiny model on
# CPU). PyPI's torch wheel brings CUDA's libraries (about 4.5 GB installed; its import needs them
# even on CPU); pip's cache makes a second venv a local copy.
if ! "$VENV/bin/python" -c "import trl, transformers, torch" 2>/dev/null; then
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "torch==2.15.0" "transformers==5.25.0" \
    "trl==1.16.0" "accelerate==1.16.0" "datasets==5.2.0" "tokenizers==0.23.3" >&2
fi
# verifiers' evaluation CLI (vf-eval) for the same tests: what it imports beyond verifiers.v1, uv
# (its harness program runs as a uv script), and that program's declared dependencies as wheels,
# so that the tests build the program's environment offline (UV_NO_INDEX, UV_FIND_LINKS).
HARNESS_WHEELS="$VENV/verifiers-harness-wheels"
if ! "$VENV/bin/python" -c "import verifiers.v1.cli.eval.main" 2>/dev/null || [[ ! -d "$HARNESS_WHEELS" ]]; then
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "prime-runs==0.1.4" "loguru==0.7.3" "uv==0.9.30" >&2
  read -r -a harness_deps < <("$VENV/bin/python" - <<'PY'
import json, re
from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM
print(" ".join(json.loads(re.search(r"^# dependencies = (\[.*\])$", CHAT_PROGRAM, re.M).group(1))))
PY
  )
  "$VENV/bin/pip" download --quiet --disable-pip-version-check -d "$HARNESS_WHEELS.tmp" "${harness_deps[@]}" >&2
  mv "$HARNESS_WHEELS.tmp" "$HARNESS_WHEELS"
fi
echo "$VENV"
