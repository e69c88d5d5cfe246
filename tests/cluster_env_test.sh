#!/bin/sh
# A job started the ways a cluster starts one, with exactly the environment
# each gives its processes (docs/clusters.md has the manifests), on two
# namespace hosts ("nodes") with two ranks ("pods") each, the root named by
# host name as a cluster's DNS names the first pod:
#   - a Kubernetes Indexed Job behind a headless Service: JOB_COMPLETION_INDEX
#     is the rank; WORLD_SIZE and NNPCCL_ROOT come from the manifest;
#   - Kubeflow's PyTorchJob: MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE
#     (and the PET_* variables torchrun would read);
#   - Kubeflow's MPIJob: the OMPI_COMM_WORLD_* variables its mpirun gives
#     each rank, with NNPCCL_ROOT passed by the manifest (mpirun -x).
# Each runs every rank's ccl-bench allreduce, checked bit for bit. Skips
# (exit 77) where namespaces cannot be made.
set -u
bench=$1
tools=$2
name="nnpce$$"
if ! "$tools/netns-hosts" check; then
    echo "SKIP: cannot create network namespaces here (needs root and ip netns)"
    exit 77
fi
"$tools/netns-hosts" up 2 "$name" || exit 1
logs=$(mktemp -d)
trap '"$tools/netns-hosts" down "$name"; rm -rf "$logs"' EXIT
failed=0
port=29600

# $1: label; $2: a shell snippet printing rank $rank's environment (one
# VAR=value per line; $host, $port and $name are set).
run_job() {
    label=$1 environment=$2
    port=$((port + 1))
    pids=""
    for rank in 0 1 2 3; do
        host=$((rank / 2 + 1))
        # Only what the cluster would set, plus the timeout.
        vars=$(eval "$environment")
        # shellcheck disable=SC2086
        env -i PATH="$PATH" NNPCCL_TIMEOUT=60 $vars \
            "$tools/netns-hosts" run "$name" "$host" "$bench" allreduce -b 8 -e 1M -f 32 -c 1 \
            >"$logs/$rank.out" 2>"$logs/$rank.err" &
        pids="$pids $!"
    done
    status=0
    for pid in $pids; do wait "$pid" || status=1; done
    if [ $status -ne 0 ] || ! grep -q "^# ccl-bench allreduce: nnpccl [^,]*, 4 ranks\$" "$logs/0.out" ||
        ! grep -q "Out of bounds values : 0 OK" "$logs/0.out" ||
        ! awk '$1 ~ /^[0-9]+$/ {n++; if ($9 != 0 || $13 != 0) bad = 1} END {exit bad || n != 4}' "$logs/0.out"; then
        echo "FAILED: $label"
        for f in "$logs"/*; do echo "== $f"; tail -5 "$f"; done
        failed=1
    else
        echo "ok: $label"
    fi
}

run_job "Kubernetes Indexed Job (JOB_COMPLETION_INDEX, root by the first pod's name)" \
    'echo JOB_COMPLETION_INDEX=$rank WORLD_SIZE=4 NNPCCL_ROOT=$name-h1:$port'
run_job "Kubeflow PyTorchJob (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)" \
    'echo MASTER_ADDR=$name-h1 MASTER_PORT=$port RANK=$rank WORLD_SIZE=4 PET_NNODES=4 PET_NPROC_PER_NODE=1 PET_NODE_RANK=$rank'
run_job "Kubeflow MPIJob (OMPI_COMM_WORLD_*, NNPCCL_ROOT from mpirun -x)" \
    'echo OMPI_COMM_WORLD_RANK=$rank OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_LOCAL_RANK=$((rank % 2)) OMPI_COMM_WORLD_LOCAL_SIZE=2 OMPI_MCA_ess_base_jobid=$port NNPCCL_ROOT=$name-h1:$port'
exit "$failed"
