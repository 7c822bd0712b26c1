#!/usr/bin/env bash
# Installs kernelgym's build and runtime dependencies from Debian 12 packages.
# Idempotent: when every package is already installed it does nothing (and needs no network).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev nlohmann-json3-dev libcurl4-openssl-dev
  libtorch-dev libopenblas0-pthread            # OpenBLAS: without it libtorch runs on netlib BLAS, ~25x slower
  libgtest-dev libgmock-dev libbenchmark-dev
  libseccomp-dev bubblewrap libelf-dev libssl-dev
  libcli11-dev libspdlog-dev patch              # patch: applies unified-diff actions
  libcpp-httplib-dev                            # the scripted chat-completions endpoint (LLM policy tests)
  tmux                                          # the HITL terminal's test drives it in a real terminal
  python3 python3-venv python3-pip              # the Python package (python/); scripts/test.sh tests it in a venv
  clang libclang-rt-14-dev                      # libFuzzer + ASan/UBSan runtimes: scripts/test.sh's fuzz runs (tests/fuzz/)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "install_deps: missing packages: ${missing[*]}; run this script as root (or install them)" >&2
  exit 1
fi
echo "install_deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
