#!/bin/sh
# The seeds' workload: data-parallel training over nnpccl on 2 and 3 ranks
# (float32 and bfloat16 gradients), checked after every step: the replicas'
# parameters bit-identical, equal within tolerance to one process training on
# the global batch, and the loss falling (dist_mlp --check exits non-zero
# otherwise). On Fashion-MNIST where Debian's dataset-fashion-mnist is
# installed (CI installs it, and fails without it), else on the synthetic set;
# over MPI (--backend mpi) under mpirun where it was built with Open MPI;
# and briefly under torchrun (nnpccl_comm_init_from_env) where /usr/bin/python3 has
# torch.
#   dist_mlp_test.sh DIST_MLP with-mpi|without-mpi
set -u
dist_mlp=$1
with_mpi=$2
data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
    if [ "${CI:-}" = true ]; then
        echo "FAIL: $data is missing; CI=true trains on Fashion-MNIST (tools/install-deps installs dataset-fashion-mnist)" >&2
        exit 1
    fi
    echo "note: $data is missing: training on the synthetic set"
fi
failed=0
for args in "--np 2 --steps 150" "--np 3 --steps 150 --dtype bfloat16"; do
    # shellcheck disable=SC2086
    if out=$("$dist_mlp" $args --check 2>&1); then
        echo "ok: dist_mlp $args --check"
    else
        echo "FAILED: dist_mlp $args --check"
        failed=1
    fi
    echo "$out" | sed 's/^/    /'
done
# The same training over MPI_Iallreduce, where the example was built with it.
if [ "$with_mpi" != with-mpi ]; then
    echo "note: dist_mlp was built without MPI: --backend mpi not run"
else
    # Open MPI's own launcher by name: with MPICH installed too, Debian's
    # alternatives may make plain mpirun MPICH's.
    launcher=mpirun
    command -v mpirun.openmpi >/dev/null 2>&1 && launcher=mpirun.openmpi
    if out=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
        "$launcher" -np 2 "$dist_mlp" --backend mpi --steps 100 --check 2>&1); then
        echo "ok: mpirun -np 2 dist_mlp --backend mpi --check"
    else
        echo "FAILED: mpirun -np 2 dist_mlp --backend mpi --check"
        failed=1
    fi
    echo "$out" | sed 's/^/    /'
fi
# Under torchrun (nnpccl_comm_init_from_env), where /usr/bin/python3 has
# torch, briefly: torchrun's store holds MASTER_PORT, so nnpccl must meet on
# a port of its own.
if /usr/bin/python3 -c 'import torch.distributed.run' 2>/dev/null; then
    port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    if out=$(OPENBLAS_NUM_THREADS=1 /usr/bin/python3 -m torch.distributed.run --master_port="$port" \
        --nproc_per_node=2 --redirects=1 --tee=1 --no_python "$dist_mlp" --steps 20 --check 2>&1); then
        echo "ok: torchrun --master_port=$port --nproc_per_node=2 --no_python dist_mlp --steps 20 --check"
    else
        echo "FAILED: torchrun --master_port=$port --nproc_per_node=2 --no_python dist_mlp --steps 20 --check"
        failed=1
    fi
    echo "$out" | grep -v '^[[:space:]]*$' | tail -n 20 | sed 's/^/    /'
else
    echo "note: /usr/bin/python3 has no torch: dist_mlp under torchrun not run"
fi
# tools/scale-training, briefly: its table and plot.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
tools=$(cd "$(dirname "$0")/../tools" && pwd)
if /usr/bin/python3 "$tools/scale-training" --build "$(dirname "$(dirname "$dist_mlp")")" --ranks 1,2 --rounds 1 \
    --steps 5 --svg "$scratch/scaling.svg" >"$scratch/table" 2>&1 &&
    grep -q '^| 2 | bfloat16 | [0-9]' "$scratch/table" && grep -q '<polyline' "$scratch/scaling.svg"; then
    echo "ok: tools/scale-training"
else
    echo "FAILED: tools/scale-training"
    cat "$scratch/table"
    failed=1
fi
exit $failed
