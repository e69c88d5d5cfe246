#!/usr/bin/python3
"""torch.distributed.all_reduce over nnpccl against Gloo, on local ranks.

    /usr/bin/python3 bench/torch_allreduce.py [--np 2] [-b 8] [-e 64M] [-f 2]
        [--rounds 7] [--iters 50] [--ddp-steps 20] [--dtypes float32,bfloat16]

Both backends run in the same processes, in rounds that take turns (which
one goes first alternates), so that a drifting machine's speed is shared
between them; each prints the median of its rounds. A round times `iters`
back-to-back calls after a barrier and takes the slowest rank's time per
call. busbw is nccl-tests's for allreduce: size / time * 2(n-1)/n. Gloo in
torch 1.13 has no bfloat16 (n/a). Then the wall time of a DDP training step
(an MLP of 3 x 1024x1024 layers, batch 64) with each backend, again in
alternating rounds.

nnpccl_torch is imported from PYTHONPATH, the installed module, or this
checkout's build/python."""

import argparse
import datetime
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

try:
    import nnpccl_torch  # noqa: F401 - registers the backend
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "python"))
    import nnpccl_torch  # noqa: F401


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def sizes(args):
    n = args.min_bytes
    while n <= args.max_bytes:
        yield n
        n *= args.factor


def timed(fn, group, iters):
    """Seconds per call of fn, the slowest rank's."""
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    elapsed = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=group)
    return elapsed.item()


def rounds_of(candidates, rounds):
    """{name: median seconds} over rounds that alternate which goes first."""
    times = {name: [] for name in candidates}
    names = list(candidates)
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            times[name].append(candidates[name]())
    return {name: statistics.median(t) for name, t in times.items()}


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024)
        )

    def forward(self, x):
        return self.net(x)


def ddp_step_time(group, steps, rounds, gloo):
    def make(pg):
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(MLP(), process_group=pg)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = torch.randn(64, 1024), torch.randn(64, 1024)

        def step():
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()

        step()  # first touch of DDP's buckets
        return step

    ours, theirs = make(group), make(gloo)
    return rounds_of({"nnpccl": lambda: timed(ours, gloo, steps), "gloo": lambda: timed(theirs, gloo, steps)}, rounds)


def run(rank, world, port, args):
    # Local ranks: both backends over loopback, Gloo included.
    os.environ.setdefault("NNPCCL_SOCKET_IFNAME", "lo")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    dist.init_process_group("nnpccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    gloo = dist.new_group(backend="gloo")
    if rank == 0:
        print(f"# torch {torch.__version__}, {world} ranks, median of {args.rounds} alternating rounds")
        print(f"# {'size':>10} {'count':>10} {'type':>9}   {'nnpccl us':>10} {'busbw':>7}   {'gloo us':>10} {'busbw':>7}   {'gloo/nnpccl':>11}")
    factor = 2 * (world - 1) / world
    for dtype in args.dtypes:
        elem = torch.tensor([], dtype=dtype).element_size()
        for nbytes in sizes(args):
            count = max(1, nbytes // elem)
            t = torch.ones(count, dtype=dtype)
            iters = max(3, min(args.iters, (256 << 20) // max(nbytes, 1)))
            candidates = {"nnpccl": lambda: timed(lambda: dist.all_reduce(t), None, iters)}
            if dtype != torch.bfloat16:
                candidates["gloo"] = lambda: timed(lambda: dist.all_reduce(t, group=gloo), gloo, iters)
            for fn in candidates.values():
                fn()  # warm-up
            med = rounds_of(candidates, args.rounds)
            if rank == 0:
                size = count * elem
                cols = []
                for name in ("nnpccl", "gloo"):
                    if name in med:
                        cols.append(f"{med[name] * 1e6:10.1f} {size / med[name] * factor / 1e9:7.2f}")
                    else:
                        cols.append(f"{'n/a':>10} {'n/a':>7}")
                ratio = f"{med['gloo'] / med['nnpccl']:11.2f}" if "gloo" in med else f"{'n/a':>11}"
                print(f"  {size:10d} {count:10d} {str(dtype).replace('torch.', ''):>9}   {cols[0]}   {cols[1]}   {ratio}", flush=True)
    if args.ddp_steps > 0:
        med = ddp_step_time(None, args.ddp_steps, args.rounds, gloo)
        if rank == 0:
            print(f"# DDP training step (MLP 3 x 1024x1024, batch 64): nnpccl {med['nnpccl'] * 1e3:.2f} ms, "
                  f"gloo {med['gloo'] * 1e3:.2f} ms", flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--np", type=int, default=2, help="ranks (default 2)")
    p.add_argument("-b", "--min-bytes", type=parse_size, default=8)
    p.add_argument("-e", "--max-bytes", type=parse_size, default=64 << 20)
    p.add_argument("-f", "--factor", type=int, default=2)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--iters", type=int, default=50, help="calls per round at small sizes (fewer above 5 MiB)")
    p.add_argument("--ddp-steps", type=int, default=20, help="DDP steps per round; 0 skips the DDP part")
    p.add_argument("--dtypes", default="float32,bfloat16")
    args = p.parse_args()
    names = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "float64": torch.float64}
    try:
        args.dtypes = [names[d] for d in args.dtypes.split(",")]
    except KeyError as e:
        p.error(f"unknown dtype {e} (known: {', '.join(names)})")
    if args.factor < 2 or args.min_bytes < 1 or args.rounds < 1:
        p.error("needs -f >= 2, -b >= 1 and --rounds >= 1")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(run, args=(args.np, port, args), nprocs=args.np)


if __name__ == "__main__":
    main()
