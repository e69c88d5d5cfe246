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
