#!/bin/sh
# Jobs on 2 and 4 namespace hosts whose links are capped (tc tbf, 1 Gbit/s):
# in the layouts 2x2, 4x2 (4 hosts of 2) and 3+1, every collective the
# hierarchical algorithm serves runs with it forced, rooted at the last
# rank, at 8 B, 128 B, 2 KiB, 32 KiB and 512 KiB (one channel below
# 512 KiB, several from there),
# checked bit for bit by ccl-bench, and again with the selector's own
# choice, which must plan on the two-level machine (topology hosts:...)
# and choose hierarchical for allreduce at 512 KiB. Skips (exit 77) where
# namespaces cannot be made (not root, no ip netns).
set -u
bench=$1
tools=$2
name="nnphier$$"
if ! "$tools/netns-hosts" check; then
    echo "SKIP: cannot create network namespaces here (needs root and ip netns)"
    exit 77
fi
"$tools/netns-hosts" up 4 "$name" 1gbit || exit 1
logs=$(mktemp -d)
trap '"$tools/netns-hosts" down "$name"; rm -rf "$logs"' EXIT

failed=0
port=29700
# ccl-bench's own check: every #wrong column 0 (its exit status says so too).
rows_ok() {
    awk '$1 ~ /^[0-9]+$/ && ($9 != 0 || ($13 != 0 && $13 != "N/A")) {bad=1} END {exit bad}' "$1"
}
for layout in 2x2 4x2 3,1; do
    case "$layout" in
    2x2) world=4 ;;
    4x2) world=8 ;;
    3,1) world=4 ;;
    esac
    for coll in allreduce reduce_scatter allgather broadcast reduce; do
        for how in forced chosen; do
            # The allreduce the selector chooses for runs below, with its log.
            [ "$coll.$how" = allreduce.chosen ] && continue
            port=$((port + 1))
            out="$logs/$layout.$coll.$how"
            force=""
            [ "$how" = forced ] && force="--algo hierarchical"
            # shellcheck disable=SC2086
            if ! NNPCCL_TIMEOUT=60 "$tools/netns-job" "$name" "$layout" "$port" "$bench" "$coll" $force \
                -b 8 -e 512K -f 16 -n 2 -w 1 -r $((world - 1)) >"$out" 2>&1 || ! rows_ok "$out"; then
                echo "FAILED: $coll with hierarchical $how on $layout"
                cat "$out"
                failed=1
            fi
        done
    done
    port=$((port + 1))
    out="$logs/$layout.chosen"
    mkdir -p "$logs/$layout"
    if ! NNPCCL_JOB_LOGS="$logs/$layout" NNPCCL_DEBUG=INFO NNPCCL_TIMEOUT=60 "$tools/netns-job" "$name" "$layout" \
        "$port" "$bench" allreduce -b 8 -e 512K -f 16 -n 2 -w 1 >"$out" 2>&1 || ! rows_ok "$out"; then
        echo "FAILED: allreduce with the selector's choice on $layout"
        cat "$out"
        failed=1
    fi
    err="$logs/$layout/rank.0.err"
    if ! grep -q "topology hosts:" "$err"; then
        echo "FAILED: the job on $layout did not plan on the two-level machine:"
        grep "communicator ready" "$err"
        failed=1
    fi
    for size in 524288; do
        if ! grep -q "allreduce of $size bytes: hierarchical" "$err"; then
            echo "FAILED: the selector did not choose hierarchical for allreduce of $size B on $layout:"
            grep "allreduce of $size bytes" "$err"
            failed=1
        fi
    done
    grep -h "communicator ready\|allreduce of 524288 bytes" "$err" | head -2
done
[ "$failed" -eq 0 ] && echo "every collective bit-exact with hierarchical on 2x2, 4x2 and 3+1 ranks per host"
exit "$failed"
