#!/bin/sh
# socket-bench, the raw-socket reference that tools/compare-peers sets
# beside nnpccl's TCP rows: every collective it times comes out bit for bit
# right (its rows report #wrong 0 and it exits 0), for a reduction op and
# datatype other than the defaults too, and what it cannot run (other than
# 2 ranks, a store directory) is refused in one line with exit status 2.
# Usage: socket_bench_test.sh path/to/socket-bench
set -u
bench=$1
failed=0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() { # LABEL ARGS...: exit 0, every row checked and right
    label=$1
    shift
    "$bench" "$@" >"$out/stdout" 2>"$out/stderr"
    status=$?
    rows=$(grep -c '^ *[0-9]' "$out/stdout")
    wrong=$(awk '/^ *[0-9]/ && ($9 != 0 || $13 != 0)' "$out/stdout" | wc -l)
    if [ $status -ne 0 ] || [ "$rows" -eq 0 ] || [ "$wrong" -ne 0 ]; then
        echo "FAILED: $label: exit $status, $rows rows, $wrong with wrong values"; cat "$out/stdout" "$out/stderr"; failed=1
    else
        echo "ok: $label: $rows rows"
    fi
}

refused() { # LABEL TEXT ARGS...: exit 2, one line on stderr containing TEXT
    label=$1
    text=$2
    shift 2
    "$bench" "$@" >"$out/stdout" 2>"$out/stderr"
    status=$?
    if [ $status -ne 2 ] || [ "$(wc -l <"$out/stderr")" -ne 1 ] || ! grep -qF -- "$text" "$out/stderr"; then
        echo "FAILED: $label: exit $status, stderr:"; cat "$out/stderr"; failed=1
    else
        echo "ok: $label: $(cat "$out/stderr")"
    fi
}

for collective in allreduce reduce_scatter allgather broadcast reduce; do
    run "$collective" "$collective" -b 8 -e 1M -f 32 -n 3 -w 1
done
run "allreduce of int32 max, odd sizes" allreduce -d int32 -o max -b 12 -e 300K -f 7 -n 2 -w 1
run "broadcast from root 1" broadcast -r 1 -b 1K -e 1K -n 2 -w 1
run "reduce of double prod to root 1" reduce -r 1 -d double -o prod -b 8K -e 8K -n 2 -w 1
refused "three ranks" "exactly 2 ranks" allreduce --np 3
refused "a store" "--store" allreduce --store /tmp
refused "root 2" "root 2" broadcast -r 2
exit $failed
