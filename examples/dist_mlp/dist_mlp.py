#!/usr/bin/python3
"""dist_mlp.py: the training of dist_mlp.cpp in numpy over the nnpccl Python
package. Data-parallel synchronous SGD of a 784-600-10 perceptron (ReLU,
softmax cross-entropy): every rank trains on its shard of each global batch,
each layer's gradients are summed over the ranks by a nonblocking allreduce
started as soon as back-propagation has produced them, and every replica
applies the same update.

    dist_mlp.py --np 4                               # 4 local ranks, spawned here
    torchrun --nproc_per_node 4 dist_mlp.py          # or mpirun -np 4 dist_mlp.py
    dist_mlp.py --np 2 --dtype bfloat16 --check --steps 200

Data: Fashion-MNIST from Debian's dataset-fashion-mnist, else a seeded
synthetic set (said so on stderr). With --np the ranks run numpy's BLAS on
one thread each, so that N ranks do not start N x cores threads; under a
launcher, set OPENBLAS_NUM_THREADS=1 yourself.
"""

import argparse
import gzip
import hashlib
import os
import subprocess
import sys
import time

INPUTS, HIDDEN, CLASSES = 784, 600, 10
PARTS = ("w0", "b0", "w1", "b1")


def read_idx(images, labels):
    """An MNIST-style IDX pair as (float32 images in [0, 1], uint8 labels)."""
    import numpy as np
    with gzip.open(images, "rb") as f:
        img = f.read()
    with gzip.open(labels, "rb") as f:
        lab = f.read()
    n = int.from_bytes(img[4:8], "big")
    if (int.from_bytes(img[:4], "big") != 0x803 or int.from_bytes(lab[:4], "big") != 0x801
            or img[8:16] != (28).to_bytes(4, "big") * 2 or int.from_bytes(lab[4:8], "big") != n
            or len(img) != 16 + n * INPUTS or len(lab) != 8 + n):
        raise ValueError(f"{images} or {labels} is not an MNIST-style IDX file of 28x28 images")
    x = np.frombuffer(img, dtype=np.uint8, offset=16).reshape(n, INPUTS).astype(np.float32) / 255.0
    return x, np.frombuffer(lab, dtype=np.uint8, offset=8).copy()


def synthetic(n, seed):
    """Ten classes, each a fixed random prototype plus noise."""
    import numpy as np
    rng = np.random.default_rng(seed)
    prototypes = np.where(rng.random((CLASSES, INPUTS)) < 0.3, rng.random((CLASSES, INPUTS)), 0).astype(np.float32)
    y = rng.integers(0, CLASSES, n).astype(np.uint8)
    noise = (0.3 * (rng.random((n, INPUTS)) - 0.5)).astype(np.float32)
    return np.clip(prototypes[y] + noise, 0, 1).astype(np.float32), y


def load(args, rank):
    d = args.data
    if not args.synthetic:
        try:
            return (read_idx(f"{d}/train-images-idx3-ubyte.gz", f"{d}/train-labels-idx1-ubyte.gz"),
                    read_idx(f"{d}/t10k-images-idx3-ubyte.gz", f"{d}/t10k-labels-idx1-ubyte.gz"))
        except (OSError, ValueError) as e:
            if rank == 0:
                print(f"dist_mlp.py: {e} (apt-get install dataset-fashion-mnist); training on a synthetic set",
                      file=sys.stderr)
    return synthetic(12000, args.seed + 2), synthetic(2000, args.seed + 3)


def init_params(seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    r0, r1 = (6.0 / (INPUTS + HIDDEN)) ** 0.5, (6.0 / (HIDDEN + CLASSES)) ** 0.5
    return {
        "w0": rng.uniform(-r0, r0, (HIDDEN, INPUTS)).astype(np.float32),
        "b0": np.zeros(HIDDEN, np.float32),
        "w1": rng.uniform(-r1, r1, (CLASSES, HIDDEN)).astype(np.float32),
        "b1": np.zeros(CLASSES, np.float32),
    }


def forward(p, x):
    import numpy as np
    h = np.maximum(x @ p["w0"].T + p["b0"], 0)
    z = h @ p["w1"].T + p["b1"]
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return h, e / e.sum(axis=1, keepdims=True)


def gradients(p, x, y, scale, layer_done):
    """Gradients of the summed loss over x, divided by scale (the global
    batch); layer_done(name, gradient) is called for each part as soon as
    it is final. Returns (gradients, summed loss)."""
    import numpy as np
    h, prob = forward(p, x)
    loss = float(-np.log(np.maximum(prob[np.arange(len(y)), y], 1e-30)).sum())
    dz = prob.copy()
    dz[np.arange(len(y)), y] -= 1
    dz /= scale
    g = {"w1": dz.T @ h, "b1": dz.sum(axis=0)}
    layer_done("w1", g["w1"])
    layer_done("b1", g["b1"])
    dh = (dz @ p["w1"]) * (h > 0)
    g["w0"] = dh.T @ x
    g["b0"] = dh.sum(axis=0)
    layer_done("w0", g["w0"])
    layer_done("b0", g["b0"])
    return g, loss


def to_bfloat16(a):
    """float32 to bfloat16 bits (uint16), rounding to nearest even; NaN stays NaN."""
    import numpy as np
    bits = a.view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, ((bits >> 16) | 0x40).astype(np.uint16), rounded)


def from_bfloat16(b):
    import numpy as np
    return (b.astype(np.uint32) << 16).view(np.float32)


def digest(params):
    h = hashlib.blake2b(digest_size=8)
    for name in PARTS:
        h.update(params[name].tobytes())
    return int.from_bytes(h.digest(), "little")


def import_nnpccl():
    """The nnpccl package: installed (meson install) or on PYTHONPATH, else
    the one in the build tree of the checkout this script is in (meson
    setup build), so that the script runs as written from a fresh clone."""
    try:
        import nnpccl
        return nnpccl
    except ImportError as missing:
        build_python = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build",
                                                     "python"))
        if not os.path.isfile(os.path.join(build_python, "nnpccl", "__init__.py")):
            raise ImportError(f"dist_mlp.py: cannot import nnpccl ({missing}), and {build_python} holds no build of "
                              "it: build this checkout (meson setup build && meson compile -C build), install it "
                              "(meson install -C build), or set PYTHONPATH to a build's python/ directory") from None
        sys.path.insert(0, build_python)
        import nnpccl
        return nnpccl


def train(args):
    import numpy as np
    nnpccl = import_nnpccl()
    comm = nnpccl.Communicator.from_env()
    rank, nranks = comm.rank, comm.size
    (train_x, train_y), (test_x, test_y) = load(args, rank)
    params = init_params(args.seed)
    serial = {k: v.copy() for k, v in params.items()}  # --check: one process on the global batch
    glob = args.batch * nranks
    steps_per_epoch = len(train_y) // glob
    shuffle = np.random.default_rng(args.seed + 1)
    bf16 = args.dtype == "bfloat16"
    status, worst, serial_losses, step = 0, 0.0, [], 0
    if rank == 0:
        print(f"# dist_mlp.py: {nranks} ranks, batch {args.batch} per rank ({glob} global), lr {args.lr}, "
              f"{args.dtype} gradients\n"
              "# epoch    steps      loss   test acc    images/s   step ms   allreduce wait ms", flush=True)
    for epoch in range(1, args.epochs + 1):
        if args.steps >= 0 and step >= args.steps:
            break
        order = shuffle.permutation(len(train_y))
        loss, waited, steps = 0.0, 0.0, 0
        t0 = time.perf_counter()
        for s in range(steps_per_epoch):
            if args.steps >= 0 and step >= args.steps:
                break
            batch = order[s * glob:(s + 1) * glob]
            x, y = train_x[batch], train_y[batch]
            mine = slice(rank * args.batch, (rank + 1) * args.batch)
            pending, wire = [], {}

            def start(name, grad):
                wire[name] = to_bfloat16(grad) if bf16 else grad
                pending.append(comm.iallreduce(wire[name], dtype="bfloat16" if bf16 else None))

            grads, part_loss = gradients(params, x[mine], y[mine], glob, start)
            loss += part_loss
            w0 = time.perf_counter()
            for request in pending:
                request.wait()
            waited += time.perf_counter() - w0
            for name in PARTS:
                params[name] -= args.lr * (from_bfloat16(wire[name]) if bf16 else wire[name])
            step += 1
            steps += 1
            if args.check:
                mine_digest = np.array([digest(params)], np.uint64)
                all_digests = np.zeros(nranks, np.uint64)
                comm.allgather(mine_digest, all_digests)
                if (all_digests != all_digests[0]).any():
                    if rank == 0:
                        print(f"dist_mlp.py: step {step}: the replicas' parameters differ", file=sys.stderr)
                    status = 1
                if rank == 0:
                    serial_grads, serial_loss = gradients(serial, x, y, glob, lambda name, grad: None)
                    serial_losses.append(serial_loss / glob)
                    for name in PARTS:
                        serial[name] -= args.lr * serial_grads[name]
                        worst = max(worst, float(np.abs(params[name] - serial[name]).max()))
        seconds = time.perf_counter() - t0
        totals = np.array([loss, 0.0])
        lo, hi = len(test_y) * rank // nranks, len(test_y) * (rank + 1) // nranks
        totals[1] = float((forward(params, test_x[lo:hi])[1].argmax(axis=1) == test_y[lo:hi]).sum())
        comm.allreduce(totals)
        if rank == 0:
            per_step = 1e3 / max(steps, 1)
            print(f"{epoch:7d}  {steps:7d}  {totals[0] / max(steps * glob, 1):8.4f}  "
                  f"{100 * totals[1] / len(test_y):8.2f}%  {steps * glob / seconds:10.0f}  "
                  f"{seconds * per_step:8.3f}  {waited * per_step:18.3f}", flush=True)
    if args.check and rank == 0:
        tolerance = 1e-2 if bf16 else 1e-4
        print(f"# check: replicas bit-identical after every step: {'yes' if status == 0 else 'NO'}; largest "
              f"difference from one process on the global batch: {worst:.3g} (tolerance {tolerance:g})")
        tenth = max(1, len(serial_losses) // 10)
        first, last = np.mean(serial_losses[:tenth]), np.mean(serial_losses[-tenth:])
        print(f"# check: mean loss of the first {tenth} steps {first:.4f}, of the last {tenth} {last:.4f}",
              flush=True)
        if not worst <= tolerance or not last < first:
            status = 1
    comm.destroy()
    return status


def spawn(args):
    """--np N: N copies of this script, meeting as torchrun's ranks would on
    one host (nnpccl's launcher environment makes the rendezvous file)."""
    job = f"{os.getpid()}-{time.monotonic_ns()}"
    argv = [a for a in sys.argv[1:]]
    i = argv.index("--np") if "--np" in argv else None
    if i is not None:
        del argv[i:i + 2]
    else:
        argv = [a for a in argv if not a.startswith("--np=")]
    children = []
    for r in range(args.np):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.np), LOCAL_WORLD_SIZE=str(args.np),
                   TORCHELASTIC_RUN_ID=job, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        env.pop("MASTER_ADDR", None)
        children.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv, env=env))
    codes = [c.wait() for c in children]
    return next((c for c in codes if c != 0), 0)


def main():
    parser = argparse.ArgumentParser(description="data-parallel training of a 784-600-10 MLP over nnpccl, in numpy")
    parser.add_argument("--np", type=int, default=0, help="ranks to spawn on this host (0: from the launcher)")
    parser.add_argument("--epochs", type=int, default=2, help="passes over the training set")
    parser.add_argument("--batch", type=int, default=32, help="images per rank per step")
    parser.add_argument("--lr", type=float, default=0.05, help="learning rate")
    parser.add_argument("--seed", type=int, default=1, help="seed of the weights and the shuffle")
    parser.add_argument("--steps", type=int, default=-1, help="stop after this many steps")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                        help="datatype the gradients are summed in")
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist",
                        help="directory of the Fashion-MNIST IDX files")
    parser.add_argument("--synthetic", action="store_true", help="train on the seeded synthetic set")
    parser.add_argument("--check", action="store_true",
                        help="after every step, check the replicas are bit-identical and match one process on the "
                        "global batch")
    args = parser.parse_args()
    if args.np < 0 or args.epochs < 1 or args.batch < 1 or args.lr <= 0:
        parser.error("--np must be >= 0, --epochs and --batch >= 1, --lr > 0")
    try:
        import_nnpccl()  # here too, so that a missing package is said once, not by every rank
    except ImportError as e:
        print(e, file=sys.stderr)
        return 1
    return spawn(args) if args.np > 0 else train(args)


if __name__ == "__main__":
    sys.exit(main())
