#!/bin/sh
# Losing a host in the middle of a job, on two namespace hosts with two
# ranks each (rank 0, on host 1, runs the rendezvous root): the root's rank
# killed, and each host's link cut (its switch port set down, so its
# sockets stay open and its packets vanish, as when a host loses power).
# Every survivor must end with an error naming a lost rank, the kill within
# 5 s, a cut within 10 s (the bootstrap's heartbeat notices about 5 s of
# silence; NNPCCL_TIMEOUT is set far beyond that, so the heartbeat, not the
# deadline, must end it); none may hang. Skips (exit 77) where namespaces
# cannot be made.
set -u
bench=$1
tools=$2
name="nnphl$$"
if ! "$tools/netns-hosts" check; then
    echo "SKIP: cannot create network namespaces here (needs root and ip netns)"
    exit 77
fi
logs=$(mktemp -d)
cleanup() {
    for f in "$logs"/*.pid; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; done
    "$tools/netns-hosts" down "$name"
    rm -rf "$logs"
}
trap cleanup EXIT
root_addr=$("$tools/netns-hosts" addr 1)
failed=0
port=29500

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# $1: label, $2: what to do to the job once it runs, $3: which ranks are
# expected to survive it, $4: the most milliseconds any survivor may take,
# $5: text every survivor's error must contain (an extended regex).
trial() {
    label=$1 inject=$2 survivors=$3 limit_ms=$4 expected=$5
    "$tools/netns-hosts" up 2 "$name" || exit 1
    port=$((port + 1))
    rm -f "$logs"/*
    for rank in 0 1 2 3; do
        host=$((rank / 2 + 1))
        # The wrapper records the bench's pid and, when it ends, its status
        # and the time.
        NNPCCL_DEBUG=INFO NNPCCL_TIMEOUT=120 RANK=$rank WORLD_SIZE=4 NNPCCL_ROOT="$root_addr:$port" \
            "$tools/netns-hosts" run "$name" "$host" sh -c '
                "$1" allreduce -b 256K -e 256K -n 1000000 -w 2 -c 0 >"$2.out" 2>"$2.err" &
                echo $! >"$2.pid"
                wait $!
                echo "$? $(($(date +%s%N) / 1000000))" >"$2.done"' sh "$bench" "$logs/$rank" &
    done
    # Running: rank 0 logs its transports once the job has formed.
    waited=0
    until grep -q 'reaches rank' "$logs/0.err" 2>/dev/null || [ $waited -ge 600 ]; do
        sleep 0.1
        waited=$((waited + 1))
    done
    if [ $waited -ge 600 ]; then
        echo "FAILED: $label: the job did not start"
        cat "$logs"/*.err
        failed=1
    fi
    sleep 1
    t0=$(now_ms)
    eval "$inject"
    deadline=$((t0 + 30000))
    while [ "$(now_ms)" -lt $deadline ]; do
        done_count=0
        for rank in $survivors; do [ -f "$logs/$rank.done" ] && done_count=$((done_count + 1)); done
        [ $done_count -eq "$(echo $survivors | wc -w)" ] && break
        sleep 0.1
    done
    worst=0
    for rank in $survivors; do
        if [ ! -f "$logs/$rank.done" ]; then
            echo "FAILED: $label: rank $rank still running 30 s after (a hang)"
            failed=1
            continue
        fi
        set -- $(cat "$logs/$rank.done")
        took=$(($2 - t0))
        [ $took -gt $worst ] && worst=$took
        message=$(grep -m1 "communicator failed" "$logs/$rank.err" | head -c 400)
        if [ "$1" -eq 0 ]; then
            echo "FAILED: $label: rank $rank exited 0"
            failed=1
        elif [ $took -gt "$limit_ms" ]; then
            echo "FAILED: $label: rank $rank took $took ms (limit $limit_ms): $message"
            failed=1
        elif ! grep -qE "$expected" "$logs/$rank.err"; then
            echo "FAILED: $label: rank $rank's error does not match '$expected':"
            cat "$logs/$rank.err"
            failed=1
        fi
    done
    echo "$label: survivors $survivors ended in at most $worst ms; rank $rank said: $message"
    for rank in 0 1 2 3; do [ -f "$logs/$rank.pid" ] && kill -9 "$(cat "$logs/$rank.pid")" 2>/dev/null; done
    wait
    "$tools/netns-hosts" down "$name"
}

trial "rank 0 (hosting the root) killed" 'kill -9 $(cat "$logs/0.pid")' "1 2 3" 5000 \
    "rank 0, whose process hosted the job's rendezvous root at .* has gone|rank 0 .*died"
trial "host 2's link cut" "ip -n $name-sw link set port2 down" "0 1 2 3" 10000 \
    "rank [0-3].* went silent"
trial "host 1's link cut (the root's host)" "ip -n $name-sw link set port1 down" "0 1 2 3" 10000 \
    "rank [0-3].* went silent"
exit "$failed"
