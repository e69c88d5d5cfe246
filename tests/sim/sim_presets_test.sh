#!/bin/sh
# Every collective on every preset, every algorithm that applies, at a small
# and a pipelined size: ccl-sim simulates them all (no deadlock, no
# mismatched schedules: it reports both as failures) and prints a time for
# each. nnpt-pod1024 with 64 of its chips, and whole for a few calls: direct
# on all 1024 ranks sends a million messages per chunk, its prediction too
# takes seconds.
# Usage: sim_presets_test.sh path/to/ccl-sim
set -u
sim=$1
failed=0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() {
    label=$1
    shift
    "$sim" "$@" --all-algos >"$out/stdout" 2>"$out/stderr"
    status=$?
    rows=$(grep -vc '^#' "$out/stdout")
    if [ $status -ne 0 ] || [ -s "$out/stderr" ] || grep -v '^#' "$out/stdout" | grep -q failed || [ "$rows" -lt 1 ]; then
        echo "FAILED: $label: exit $status"; cat "$out/stdout" "$out/stderr"; failed=1
    fi
}

for topo in "flat --np 5" ring:5 fc:6 hcm8 torus:3x4 nnpt-ring8 nnpt-hcm8 nnpt-pod32 "nnpt-pod1024 --np 64"; do
    for coll in allreduce reduce_scatter allgather broadcast reduce gather scatter alltoall sendrecv barrier; do
        # shellcheck disable=SC2086
        run "$coll on $topo" "$coll" --topo $topo -b 4K -e 4M -f 1024
    done
    echo "ok: every collective on $topo"
done
run "broadcast on nnpt-pod1024" broadcast --topo nnpt-pod1024 -b 1M -e 1M
run "barrier on nnpt-pod1024" barrier --topo nnpt-pod1024
echo "ok: nnpt-pod1024, all 1024 ranks"
exit $failed
