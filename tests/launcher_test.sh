#!/bin/sh
# ccl-bench started by the launchers users have, with no launcher of ours:
# Open MPI's mpirun and MPICH's hydra mpiexec (4 ranks each, oversubscribed,
# the data over nnpccl's own transports: ccl-bench does not link MPI, it
# reads each launcher's environment through nnpccl_comm_init_from_env), and
# torchrun-style environments set by a script, meeting at
# MASTER_ADDR:MASTER_PORT + 100 (as under torchrun, whose store holds
# MASTER_PORT) or, all ranks being on this host, through the rendezvous file.
#
# With both MPIs installed, Debian's alternatives decide which one `mpirun`
# and `mpiexec` are, so each is called by its own name. A missing launcher
# is skipped with a message, except under CI=true, where it fails: CI
# installs both (tools/run-tests runs tools/install-deps --mpi), and a skip
# there would hide that the test never ran.
set -u
bench=$1
failed=0
check_table() { # $1: label, $2: file with rank 0's output, $3: ranks, $4: rows of the sweep
    # A launcher whose environment nnpccl misreads can still give a clean
    # table: one of 1 rank per process. So the header must count them all.
    if ! grep -q "^# ccl-bench [a-z_]*: nnpccl [^,]*, $3 ranks\$" "$2" || ! grep -q "Out of bounds values : 0 OK" "$2" ||
        ! awk -v rows="$4" '$1 ~ /^[0-9]+$/ {n++; if ($9 != 0 || $13 != 0) bad = 1} END {exit bad || n != rows}' "$2"; then
        echo "FAILED: $1"; cat "$2"; failed=1
    else
        echo "ok: $1"
    fi
}
missing_launcher() { # $1: what is missing
    if [ "${CI:-}" = true ]; then
        echo "FAILED: $1 is not installed (CI=true: tools/install-deps --mpi should have installed it)"; failed=1
    else
        echo "skipped: $1 is not installed (tools/install-deps --mpi)"
    fi
}
out=$(mktemp -d)
# Rendezvous files made from here on are this test's, or a concurrent job's
# that removes its own within moments.
marker=$out/start
: >"$marker"
trap 'rm -rf "$out"' EXIT
# A launcher that hangs (a rank waiting for a peer that never came) is cut
# off well before meson's timeout, so the other launchers still get their turn.
limit="timeout -k 5 90"

openmpi=
if command -v mpirun.openmpi >/dev/null 2>&1; then
    openmpi=mpirun.openmpi
elif command -v mpirun >/dev/null 2>&1 && mpirun --version 2>&1 | grep -q "Open MPI"; then
    openmpi=mpirun
fi
if [ -n "$openmpi" ]; then
    # Open MPI's own daemons talk over loopback too.
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
        OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo NNPCCL_TIMEOUT=60 \
        $limit "$openmpi" -np 4 "$bench" allreduce -b 8 -e 1M -f 16 -c 1 >"$out/openmpi" 2>&1 || {
        echo "FAILED: $openmpi exited with status $?"; failed=1
    }
    check_table "Open MPI: $openmpi -np 4 ccl-bench allreduce" "$out/openmpi" 4 5
else
    missing_launcher "Open MPI's mpirun (Debian: openmpi-bin)"
fi

mpich=
for candidate in mpiexec.mpich mpiexec.hydra; do
    if command -v "$candidate" >/dev/null 2>&1; then
        mpich=$candidate
        break
    fi
done
if [ -z "$mpich" ] && command -v mpiexec >/dev/null 2>&1 && mpiexec --version 2>&1 | grep -q HYDRA; then
    mpich=mpiexec
fi
if [ -n "$mpich" ]; then
    # Hydra starts local ranks by fork (no ssh to this host). Its ranks get
    # PMI_RANK, PMI_SIZE and MPI_LOCALNRANKS, and no job id: they meet
    # through the rendezvous file named after their common parent.
    NNPCCL_TIMEOUT=60 $limit "$mpich" -launcher fork -n 4 "$bench" reduce_scatter -b 8 -e 1M -f 16 -c 1 \
        >"$out/mpich" 2>&1 || {
        echo "FAILED: $mpich exited with status $?"; failed=1
    }
    check_table "MPICH: $mpich -n 4 ccl-bench reduce_scatter" "$out/mpich" 4 5
else
    missing_launcher "MPICH's mpiexec (Debian: mpich)"
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
    check_table "$label" "$out/t.0" 3 5
}
run_torchrun_style "torchrun-style env at MASTER_ADDR:MASTER_PORT" MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29000 + $$ % 1000))
run_torchrun_style "torchrun-style env, one host, no address" LOCAL_WORLD_SIZE=3 TORCHELASTIC_RUN_ID=launcher-test-$$

# Under torchrun, torch's store listens at MASTER_PORT while the workers
# init: rank 0 hosts nnpccl's root at MASTER_PORT + 100 instead. A process
# here holds MASTER_PORT (taking connections and never answering, as a
# store would a stranger), and the job runs; holding MASTER_PORT + 100 too,
# rank 0 fails at once naming the port and its rule, and the other ranks'
# error says where rank 0 was to listen and what to set.
hold_ports() { # $@: ports on 127.0.0.1; prints the holder's pid once it listens
    /usr/bin/python3 -c '
import select, socket, sys, time
listeners = []
for port in sys.argv[1:]:
    s = socket.socket()
    # A port held a moment ago by an earlier holder may still have
    # connections in TIME_WAIT.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(port)))
    s.listen(16)
    listeners.append(s)
print("listening", flush=True)
held, end = [], time.time() + 120
while time.time() < end:
    for s in select.select(listeners, [], [], 0.5)[0]:
        held.append(s.accept()[0])
' "$@" >"$out/holder" 2>&1 &
    holder=$!
    for _ in $(seq 100); do grep -q listening "$out/holder" && break; sleep 0.1; done
    grep -q listening "$out/holder" || { echo "FAILED: could not hold ports $*:"; cat "$out/holder"; failed=1; }
}
master_port=$((20000 + $$ % 5000))
hold_ports "$master_port"
run_torchrun_style "torchrun-style env while another process holds MASTER_PORT" MASTER_ADDR=127.0.0.1 \
    MASTER_PORT=$master_port
kill "$holder"; wait "$holder" 2>/dev/null
hold_ports "$master_port" $((master_port + 100))
start=$(date +%s)
held_failed=$failed
pids=""
for rank in 0 1; do
    RANK=$rank WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$master_port NNPCCL_TIMEOUT=5 \
        "$bench" broadcast -b 8 -e 8 >"$out/p.$rank" 2>&1 &
    pids="$pids $!"
done
for pid in $pids; do
    if wait "$pid"; then echo "FAILED: a rank ran with its root's port held by another process"; failed=1; fi
done
kill "$holder"; wait "$holder" 2>/dev/null
elapsed=$(($(date +%s) - start))
grep -q "rank 0 cannot host the rendezvous root at port $((master_port + 100)) (from MASTER_ADDR=127.0.0.1 and MASTER_PORT=$master_port + 100.*Address already in use; another program holds that port: choose a free one with NNPCCL_ROOT" "$out/p.0" || {
    echo "FAILED: rank 0 did not say that it could not bind MASTER_PORT + 100:"; cat "$out/p.0"; failed=1
}
grep -q "rank 0 was to host the rendezvous root at 127.0.0.1:$((master_port + 100)) (from MASTER_ADDR=127.0.0.1 and MASTER_PORT=$master_port + 100.*if rank 0 could not bind that port" "$out/p.1" || {
    echo "FAILED: rank 1 did not say where rank 0 was to host the root:"; cat "$out/p.1"; failed=1
}
[ "$elapsed" -le 30 ] || { echo "FAILED: the ranks took ${elapsed} s to fail with NNPCCL_TIMEOUT=5"; failed=1; }
[ "$failed" = "$held_failed" ] && echo "ok: a held MASTER_PORT + 100 fails both ranks by name in ${elapsed} s"

# Ranks that each start through a wrapper of their own (timeout forks) have
# different parents, so the file rendezvous cannot join them: each fails at
# its deadline, saying how to give an address instead.
pids=""
for rank in 0 1 2; do
    RANK=$rank WORLD_SIZE=3 LOCAL_WORLD_SIZE=3 TORCHELASTIC_RUN_ID=wrapped-$$ NNPCCL_TIMEOUT=3 timeout 60 \
        "$bench" broadcast -b 8 -e 8 \
        >"$out/w.$rank" 2>&1 &
    pids="$pids $!"
done
for pid in $pids; do
    if wait "$pid"; then echo "FAILED: a rank started through its own wrapper joined a job"; failed=1; fi
done
for rank in 0 1 2; do
    grep -q "never find each other: set NNPCCL_ROOT" "$out/w.$rank" || {
        echo "FAILED: rank $rank of the wrapped launch did not say why it could not join:"; cat "$out/w.$rank"; failed=1
    }
done

# Files are removed once every rank has joined; another job's may be
# present for a moment, so only files newer than this test's start that
# outlive a few seconds count.
left=
for _ in 1 2 3 4 5; do
    left=$(find "${XDG_RUNTIME_DIR:-/tmp/nnpccl-rendezvous-$(id -u)}/." ! -name . -prune -name "nnpccl-$(id -u)-*" \
        -newer "$marker" -print 2>/dev/null)
    [ -z "$left" ] && break
    sleep 1
done
[ -z "$left" ] || { echo "FAILED: rendezvous files left behind: $left"; failed=1; }
exit "$failed"
