#!/bin/sh
# ccl-bench --np is the launcher its users and the tests lean on, and it
# must end, whatever happens to a rank or to itself:
# - a rank stopped with SIGSTOP: the others fail at NNPCCL_TIMEOUT, and the
#   launcher stops the stopped one too (SIGTERM alone stays pending in a
#   stopped process) and exits with the first failure's status;
# - the launcher killed: its ranks die with it rather than run on.
# Usage: stopped_rank_launch_test.sh path/to/ccl-bench
set -u
bench=$1
failed=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# Prints the pids of `parent`'s children, one per line.
children_of() { grep -l "^PPid:[[:space:]]*$1\$" /proc/[0-9]*/status 2>/dev/null | cut -d/ -f3; }

# A job of 3 ranks that runs until it is stopped, in the background.
start_job() {
    NNPCCL_TIMEOUT=3 "$bench" allreduce --np 3 -b 64K -e 64K -n 100000000 -w 0 >"$dir/$1.out" 2>&1 &
}

# Whether process $1 runs (a zombie has ended).
running() { grep -q "^State:[[:space:]]*[RSDTt]" "/proc/$1/status" 2>/dev/null; }

# Waits up to $2 seconds for process $1 to end; 0 when it did.
ended_within() {
    i=0
    while running "$1"; do
        i=$((i + 1))
        [ "$i" -gt $(($2 * 10)) ] && return 1
        sleep 0.1
    done
    return 0
}

start_job stopped
launcher=$!
sleep 1.5
ranks=$(children_of "$launcher")
victim=$(echo "$ranks" | head -1)
kill -STOP "$victim"
if ended_within "$launcher" 30; then
    wait "$launcher"
    status=$?
    if [ "$status" = 0 ]; then
        echo "FAILED: the job with a stopped rank exited with status 0"; cat "$dir/stopped.out"; failed=1
    elif ! grep -q "NNPCCL_TIMEOUT" "$dir/stopped.out"; then
        echo "FAILED: the job with a stopped rank did not fail at its timeout"; cat "$dir/stopped.out"; failed=1
    else
        echo "ok: a stopped rank ends the job (status $status)"
    fi
else
    echo "FAILED: ccl-bench --np did not exit within 30 s of a rank's SIGSTOP"; cat "$dir/stopped.out"; failed=1
    kill -KILL "$launcher" $ranks 2>/dev/null
fi

start_job killed
launcher=$!
sleep 1.5
ranks=$(children_of "$launcher")
kill -KILL "$launcher"
wait "$launcher" 2>/dev/null
for rank in $ranks; do
    if ! ended_within "$rank" 10; then
        echo "FAILED: rank process $rank outlived its killed launcher by 10 s"; failed=1
        kill -KILL "$rank" 2>/dev/null
    fi
done
[ "$failed" = 0 ] && echo "ok: the ranks of a killed launcher end with it"
exit "$failed"
