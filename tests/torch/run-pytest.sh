#!/bin/sh
# meson test's entry to the PyTorch backend's tests.
#   run-pytest.sh PYTHON MODULE_DIR|"" TESTS_DIR TEST_FILE...
# An empty MODULE_DIR means the module was not built (no torch, clang or a
# sanitizer build): the test is skipped (meson's status 77) on a user's
# machine, and fails where CI=true, since CI must test the backend.
set -eu
python=$1
module_dir=$2
tests_dir=$3
shift 3

skip() {
    if [ "${CI:-}" = true ]; then
        echo "FAIL: $1; CI=true needs the PyTorch backend tested (tools/install-deps --torch installs what it needs)" >&2
        exit 1
    fi
    echo "SKIP: $1"
    exit 77
}

[ -n "$module_dir" ] || skip "the nnpccl_torch module was not built (meson option torch; it needs g++, libtorch-dev, pybind11-dev and torch in $python)"
"$python" -c "import pytest" 2>/dev/null || skip "$python has no pytest (apt-get install python3-pytest)"
export PYTHONPATH="$module_dir${PYTHONPATH:+:$PYTHONPATH}"
export NNPCCL_SOCKET_IFNAME=lo GLOO_SOCKET_IFNAME=lo
# The tests live in the source tree, which a build should leave untouched.
export PYTHONDONTWRITEBYTECODE=1
cd "$tests_dir"
exec "$python" -m pytest -p no:cacheprovider -q --durations=10 -W ignore::UserWarning "$@"
