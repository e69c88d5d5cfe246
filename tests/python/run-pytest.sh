#!/bin/sh
# meson test's entry to the nnpccl Python package's tests.
#   run-pytest.sh PYTHON LIBNNPCCL PACKAGE_PARENT_DIR TESTS_DIR [TEST_FILE...]
# With test files named (relative to TESTS_DIR), only those run.
# Without numpy or pytest the test is skipped (meson's status 77) on a
# user's machine, and fails where CI=true, since CI must test the package.
set -eu
python=$1
export NNPCCL_LIBRARY=$2
export PYTHONPATH="$3${PYTHONPATH:+:$PYTHONPATH}"
tests_dir=$4
shift 4
for module in numpy pytest; do
    if ! "$python" -c "import $module" 2>/dev/null; then
        if [ "${CI:-}" = true ]; then
            echo "FAIL: $python has no $module; CI=true needs the Python package tested (tools/install-deps installs it)" >&2
            exit 1
        fi
        echo "SKIP: $python has no $module (apt-get install python3-$module)"
        exit 77
    fi
done
export NNPCCL_SOCKET_IFNAME=lo PYTHONDONTWRITEBYTECODE=1
if [ $# -eq 0 ]; then
    exec "$python" -m pytest -p no:cacheprovider -q --durations=10 "$tests_dir"
fi
cd "$tests_dir"
exec "$python" -m pytest -p no:cacheprovider -q --durations=10 "$@"
