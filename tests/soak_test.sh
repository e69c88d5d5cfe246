#!/bin/sh
# A short ccl-bench --soak on 5 ranks over shared memory: a random mix of
# every collective, size, datatype and op, each result checked bit for bit,
# for long enough that the library's caches have warmed up by half time, so
# that RSS growth from then on, or a file descriptor opened and never
# closed, is a leak. 5 ranks: not a power of two, so halving-doubling folds
# ranks and blocks split unevenly. Over libfabric the soak needs minutes
# before its memory settles (see the README), too long for the suite.
# The soak itself fails (exit 1, "# soak FAILED") on any wrong value, write
# out of bounds, leak, or failed call, including the allreduce that sums
# the ranks' counts; this checks that it said so, and that it did some work.
# Then that NNPCCL_SHM_BYTES bounds the queues, and that bad values of it are
# refused.
set -u
bench=$1
seconds=${2:-15}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$bench" --soak "$seconds" --np 5 -e 1M >"$out/soak" 2>"$out/err"
status=$?
cat "$out/soak"
# Fewer than a few hundred calls in all would leave most of the mix
# untried: the soak stalled rather than passed.
if [ $status -ne 0 ] || ! grep -q "^# soak: 5 ranks" "$out/soak" || ! grep -q "^# soak OK\$" "$out/soak" ||
    ! grep -q "^# wrong values    : 0 OK\$" "$out/soak" || ! grep -q "^# out of bounds   : 0 OK\$" "$out/soak" ||
    ! awk '/^# operations/ {ops = $4} END {exit !(ops >= 300)}' "$out/soak"; then
    echo "FAILED: ccl-bench --soak $seconds --np 5 (exit $status)"
    cat "$out/err"
    exit 1
fi
echo "ok: ccl-bench --soak $seconds --np 5"

# NNPCCL_SHM_BYTES bounds the shared memory each rank's queues hold: 4
# ranks take 48 MiB of queues each by default, and under a 16 MiB bound the
# soak (which touches every queue) must find its queues within it.
NNPCCL_SHM_BYTES=16M "$bench" --soak 3 --np 4 -e 1M >"$out/bounded" 2>"$out/err"
status=$?
cat "$out/bounded"
resident=$(sed -n 's/^# memory (max over ranks): shared-memory queues \([0-9]*\) KiB resident.*/\1/p' "$out/bounded")
if [ $status -ne 0 ] || ! grep -q "^# soak OK\$" "$out/bounded" || [ -z "$resident" ] || [ "$resident" -eq 0 ] ||
    [ "$resident" -gt 16384 ]; then
    echo "FAILED: NNPCCL_SHM_BYTES=16M ccl-bench --soak 3 --np 4: exit $status, queues resident '${resident}' KiB (bound 16384)"
    cat "$out/err"
    exit 1
fi
echo "ok: NNPCCL_SHM_BYTES=16M holds 4 ranks' queues to ${resident} KiB"

# A bound the job cannot meet, and a value that is no size, fail at init
# with a message that names the variable.
expect_refusal() { # VALUE NP WHAT
    NNPCCL_SHM_BYTES=$1 "$bench" --soak 1 --np "$2" -e 1K >"$out/refused" 2>&1
    status=$?
    if [ $status -eq 0 ] || ! grep -q "NNPCCL_SHM_BYTES=[^ ]* $3" "$out/refused"; then
        echo "FAILED: NNPCCL_SHM_BYTES=$1 --np $2 was not refused with '$3' (exit $status)"
        cat "$out/refused"
        exit 1
    fi
    echo "ok: NNPCCL_SHM_BYTES=$1 --np $2: $(grep -o "NNPCCL_SHM_BYTES=[^;(]*" "$out/refused" | head -n 1)"
}
expect_refusal 2M 4 "is too small for 4 ranks on this host"
expect_refusal lots 2 "is not a size from 1M to 1024G"
expect_refusal 512K 2 "is not a size from 1M to 1024G"
