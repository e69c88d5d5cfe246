#!/bin/sh
# meson test's entry to a fixed subset of torch's own distributed suite
# against nnpccl (tools/torch-conformance runs all of it, for Gloo too).
#   run-suite-subset.sh PYTHON MODULE_DIR|"" TESTS_DIR CASE...
# An empty MODULE_DIR means the module was not built: skipped (77) on a
# user's machine, a failure where CI=true, as run-pytest.sh does.
set -eu
python=$1
module_dir=$2
tests_dir=$3
shift 3

if [ -z "$module_dir" ]; then
    if [ "${CI:-}" = true ]; then
        echo "FAIL: the nnpccl_torch module was not built; CI=true needs the PyTorch backend tested" >&2
        exit 1
    fi
    echo "SKIP: the nnpccl_torch module was not built (meson option torch)"
    exit 77
fi
export PYTHONPATH="$module_dir${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
exec "$python" "$tests_dir/conformance.py" --backend nnpccl --world 2 --timeout 60 --require-pass --cases "$@"
