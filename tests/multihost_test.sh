#!/bin/sh
# Two hosts (network namespaces) with two ranks each: every collective runs
# with data crossing the hosts over the network transport and staying in
# shared memory within a host, checked bit for bit by ccl-bench: over
# nnpccl's sockets (the default here, where libfabric offers only TCP), then
# over libfabric (NNPCCL_NET_TRANSPORT=ofi). Skips (exit 77) where
# namespaces cannot be made (not root, no ip netns).
set -u
bench=$1
tools=$2
name="nnpmh$$"
if ! "$tools/netns-hosts" check; then
    echo "SKIP: cannot create network namespaces here (needs root and ip netns)"
    exit 77
fi
"$tools/netns-hosts" up 2 "$name" || exit 1
trap '"$tools/netns-hosts" down "$name"' EXIT
root_addr=$("$tools/netns-hosts" addr 1)
logs=$(mktemp -d)
trap '"$tools/netns-hosts" down "$name"; rm -rf "$logs"' EXIT

failed=0
port=29400
for net in socket ofi; do
net_env=
[ $net = ofi ] && net_env=NNPCCL_NET_TRANSPORT=ofi
for coll in allreduce reduce_scatter allgather broadcast reduce gather scatter alltoall sendrecv; do
    port=$((port + 1))
    pids=""
    for rank in 0 1 2 3; do
        host=$((rank / 2 + 1))
        env $net_env NNPCCL_DEBUG=INFO NNPCCL_TIMEOUT=60 RANK=$rank WORLD_SIZE=4 NNPCCL_ROOT="$root_addr:$port" \
            "$tools/netns-hosts" run "$name" "$host" "$bench" "$coll" -b 8 -e 4M -f 8 -c 1 -r 3 \
            >"$logs/$coll.$rank.out" 2>"$logs/$coll.$rank.err" &
        pids="$pids $!"
    done
    for pid in $pids; do
        wait "$pid" || failed=1
    done
    echo "== $coll across hosts over $net"
    cat "$logs/$coll.0.out"
    # The row check: every #wrong column is 0 (ccl-bench's exit status says so
    # too); sendrecv has no in-place columns (N/A).
    if ! awk '$1 ~ /^[0-9]+$/ && ($9 != 0 || ($13 != 0 && $13 != "N/A")) {bad=1} END {exit bad}' "$logs/$coll.0.out"; then
        echo "FAILED: $coll over $net has wrong values"
        failed=1
    fi
done
# Rank 0 must have reached rank 1 over shm and ranks 2 and 3 over the network transport.
if ! grep -q "reaches rank(s) 1 over shm" "$logs/allreduce.0.err" || ! grep -q "reaches rank(s) 2,3 over $net" "$logs/allreduce.0.err"; then
    echo "FAILED: rank 0 did not pick shm within its host and $net across:"
    failed=1
fi
grep -E "reaches|transport:|reached over" "$logs/allreduce.0.err" || true
done
[ "$failed" -eq 0 ] || { for f in "$logs"/*.err; do echo "== $f"; tail -5 "$f"; done; }
exit "$failed"
