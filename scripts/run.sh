#!/usr/bin/env bash
# The main job: set everything up, start the environment server with a local runner, and run one
# short episode through the C++ client (starter -> an improved kernel -> a broken edit -> revert
# -> submit), printing every observation and reward; then the same server through the Python
# package (pip-installed into a venv): a random-knobs agent, and an episode on the pallas backend
# (a Pallas TPU kernel: deviceless TPU compile, interpret-mode check); then `kernelgym agent`, the
# LLM agent loop, its model a scripted chat-completions endpoint (policies/agent/scripted/). Stops
# everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
BUILD_DIR=${KERNELGYM_BUILD_DIR:-build}
VENV=$(scripts/python_venv.sh)
work=$(mktemp -d)
server_pid=
llm_pid=
cleanup() {
  if [[ -n "$llm_pid" ]] && kill -0 "$llm_pid" 2>/dev/null; then
    kill -TERM "$llm_pid"
    wait "$llm_pid" || true
  fi
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"
    wait "$server_pid" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

"$BUILD_DIR/cli/kernelgym" serve --bind "tcp://127.0.0.1:*" --local-runners 1 --local-runner-backends cpu,pallas \
  --endpoint-file "$work/endpoints.json" --record-dir "$work/trajectories" &
server_pid=$!
for _ in $(seq 600); do
  [[ -f "$work/endpoints.json" ]] && break
  kill -0 "$server_pid" 2>/dev/null || { echo "run.sh: the server did not start" >&2; exit 1; }
  sleep 0.1
done
endpoint=$(sed -n 's/.*"clients":"\([^"]*\)".*/\1/p' "$work/endpoints.json")

"$BUILD_DIR/policies/examples/kernelgym-demo" --connect "$endpoint" --task cpu/softmax_rows \
  --improved tests/honest/softmax_rows_avx2/kernel.cpp --record "$@"
echo
echo "==== the same server from Python: random knob settings of cpu/softmax_rows ===="
"$VENV/bin/python" -m kernelgym.examples.random_knobs_agent --connect "$endpoint" --task cpu/softmax_rows --steps 3
echo
echo "==== the pallas backend: a Pallas TPU kernel, compiled for TPU v5e without one ===="
"$VENV/bin/python" -m kernelgym.examples.pallas_episode --connect "$endpoint" --task cpu/silu_mul
echo
echo "==== kernelgym agent: plan, implement, debug, analyse, tune, submit; its model is a script ===="
"$BUILD_DIR/policies/llm/kernelgym-scripted-llm" --script policies/agent/scripted/softmax_rows/script.json \
  --port-file "$work/llm.port" &
llm_pid=$!
for _ in $(seq 100); do
  [[ -f "$work/llm.port" ]] && break
  kill -0 "$llm_pid" 2>/dev/null || { echo "run.sh: the scripted model did not start" >&2; exit 1; }
  sleep 0.1
done
NO_PROXY=127.0.0.1 "$BUILD_DIR/cli/kernelgym" agent --task cpu/softmax_rows --connect "$endpoint" \
  --endpoint "http://127.0.0.1:$(cat "$work/llm.port")/v1" --model scripted
kill -TERM "$llm_pid"
wait "$llm_pid"
llm_pid=
echo
"$BUILD_DIR/cli/kernelgym" dataset stats --store "$work/trajectories"

kill -TERM "$server_pid"
wait "$server_pid"
server_pid=
