#!/bin/sh
# ccl-bench started by the launchers users have, with no launcher of ours:
# Open MPI's mpirun (4 ranks, oversubscribed, the data over nnpccl's own
# transports: ccl-bench does not link MPI), and torchrun-style environments
# set by a script, meeting at MASTER_ADDR:MASTER_PORT or, all ranks being on
# this host, through the rendezvous file.
set -u
bench=$1
failed=0
check_table() { # $1: label, $2: file with rank 0's output
    if ! grep -q "Out of bounds values : 0 OK" "$2" || awk '$1 ~ /^[0-9]+$/ && ($9 != 0 || $13 != 0) {bad=1} END {exit !bad}' "$2"; then
        echo "FAILED: $1"; cat "$2"; failed=1
    else
        echo "ok: $1"
    fi
}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

if command -v mpirun >/dev/null 2>&1; then
    # Open MPI's own daemons talk over loopback too.
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
        OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo \
        mpirun -np 4 "$bench" allreduce -b 8 -e 1M -f 16 -c 1 >"$out/mpirun" 2>&1 || failed=1
    check_table "mpirun -np 4 ccl-bench allreduce" "$out/mpirun"
else
    echo "skipped: mpirun is not installed (tools/install-deps --peers)"
fi

run_torchrun_style() { # $1: label, then env assignments shared by all ranks
    label=$1
    shift
    pids=""
    for rank in 0 1 2; do
        env "$@" RANK=$rank WORLD_SIZE=3 LOCAL_RANK=$rank NNPCCL_TIMEOUT=60 \
            "$bench" broadcast -b 8 -e 1M -f 16 -c 1 -r 2 >"$out/t.$rank" 2>&1 &
        pids="$pids $!"
    done
    for pid in $pids; do wait "$pid" || failed=1; done
    check_table "$label" "$out/t.0"
}
run_torchrun_style "torchrun-style env at MASTER_ADDR:MASTER_PORT" MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29000 + $$ % 1000))
run_torchrun_style "torchrun-style env, one host, no address" LOCAL_WORLD_SIZE=3
leftover=$(ls /tmp/nnpccl-"$(id -u)"-* 2>/dev/null | wc -l)
[ "$leftover" -eq 0 ] || { echo "FAILED: rendezvous files left in /tmp"; failed=1; }
exit "$failed"
