#!/bin/sh
# What the README promises where libfabric cannot be loaded: a job over
# shared memory runs (libnnpccl does not link libfabric), and one that asks
# for the ofi transport fails at init with an error naming libfabric.so.1,
# on every rank, rather than crashing. A file that is not a library, first
# on the loader's path, stands in for a missing libfabric.
# Usage: missing_libfabric_test.sh path/to/ccl-bench
set -u
bench=$1
failed=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
: >"$dir/libfabric.so.1"

if ! LD_LIBRARY_PATH="$dir" "$bench" allreduce --np 2 -b 8 -e 8 -n 2 -w 1 >"$dir/shm.out" 2>&1; then
    echo "FAILED: over shared memory the job did not run:"; cat "$dir/shm.out"; failed=1
else
    echo "ok: shared memory runs without libfabric"
fi

LD_LIBRARY_PATH="$dir" "$bench" allreduce --np 2 --transport ofi -b 8 -e 8 -n 2 -w 1 >"$dir/ofi.out" 2>&1
status=$?
named=$(grep -c "init failed: ofi: cannot load libfabric.so.1" "$dir/ofi.out")
if [ $status -ne 1 ] || [ "$named" -lt 2 ]; then
    echo "FAILED: over ofi: exit $status, output:"; cat "$dir/ofi.out"; failed=1
else
    echo "ok: over ofi init fails naming libfabric.so.1 (exit $status)"
fi
exit $failed
