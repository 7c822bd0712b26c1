# Sourced by the venv scripts: pip's downloads and unpacked wheels go to a folder under the build
# folder, removed on exit, and not to a cache. Not /tmp (a small tmpfs on some hosts) nor
# ~/.cache/pip (a second copy): the trainers' wheels are ~3.5 GB compressed and ~6 GB installed,
# and a CI host that kept both ran out of space after the C++ suite had passed
# ("[Errno 28] No space left on device").
export PIP_NO_CACHE_DIR=1
mkdir -p "$BUILD_DIR/pip-scratch"
TMPDIR=$(cd "$BUILD_DIR/pip-scratch" && pwd)
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT
