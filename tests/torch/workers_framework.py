"""What each rank runs in test_framework.py: DDP comm hooks against Gloo,
peers that leave, and the profiler's spans."""

import os
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

import nnpccl_torch  # noqa: F401 - registers the backend
from workers import MLP, init


def chained_allreduce_hook(group, bucket):
    """Averages the bucket with one all_reduce, then, inside the future's
    callback, runs a second blocking all_reduce of the same group (the count
    of ranks): the callback waits for a collective that must complete while
    it runs."""
    fut = dist.all_reduce(bucket.buffer(), group=group, async_op=True).get_future()

    def divide(f):
        ranks = torch.ones(1)
        dist.all_reduce(ranks, group=group)
        return f.value()[0].div_(ranks)

    return fut.then(divide)


def stock_bf16_compress_hook(group, bucket):
    """torch's bf16_compress_hook itself: DDP refuses that function by its
    name unless torch has CUDA 11 and NCCL 2.10, which a CPU-only torch has
    not, so it is handed over under another."""
    return default_hooks.bf16_compress_hook(group, bucket)


def bf16_by_float32_hook(group, bucket):
    """bf16_compress_hook's arithmetic where the group has no bfloat16 (Gloo
    in torch 1.13): the buffer rounded to bfloat16 and divided, summed in
    float32 (the sum of two bfloat16 values is exact there) and rounded to
    bfloat16 once, as a bfloat16 sum of two ranks is."""
    world = dist.get_world_size(group)
    compressed = bucket.buffer().to(torch.bfloat16).div_(world).to(torch.float32)
    fut = dist.all_reduce(compressed, group=group, async_op=True).get_future()

    def decompress(f):
        buffer = bucket.buffer()
        buffer.copy_(f.value()[0].to(torch.bfloat16))
        return buffer

    return fut.then(decompress)


def hooks(group, name):
    """(state, hook) for DDP's register_comm_hook."""
    if name == "powerSGD":
        state = powerSGD_hook.PowerSGDState(process_group=group, matrix_approximation_rank=1, start_powerSGD_iter=2,
                                            min_compression_rate=0.5, random_seed=7)
        return state, powerSGD_hook.powerSGD_hook
    if name == "fp16_compress":
        return group, default_hooks.fp16_compress_hook
    if name == "bf16_compress":
        return group, stock_bf16_compress_hook
    if name == "bf16_by_float32":
        return group, bf16_by_float32_hook
    if name == "chained_allreduce":
        return group, chained_allreduce_hook
    raise ValueError(name)


def train(group, hook, steps):
    torch.manual_seed(1234)
    model = torch.nn.parallel.DistributedDataParallel(MLP(), process_group=group, bucket_cap_mb=0.01)
    model.register_comm_hook(*hooks(group, hook))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(99 + dist.get_rank())
    for _ in range(steps):
        x = torch.randn(32, 16, generator=g)
        y = torch.randn(32, 4, generator=g)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


# Each hook under nnpccl, and the hook whose run under Gloo is its reference.
HOOK_REFERENCES = {
    "powerSGD": "powerSGD",
    "fp16_compress": "fp16_compress",
    "bf16_compress": "bf16_by_float32",
    "chained_allreduce": "chained_allreduce",
}


def comm_hooks(rank, world, steps):
    """Trains under each hook over nnpccl and over Gloo; returns, per hook,
    the seconds it took and how many parameters differ from Gloo's."""
    init(rank, world)
    gloo = dist.new_group(backend="gloo")
    out = {}
    for hook, reference in HOOK_REFERENCES.items():
        start = time.monotonic()
        mine = train(None, hook, steps)
        seconds = time.monotonic() - start
        ref = train(gloo, reference, steps)
        out[hook] = (seconds, int((mine != ref).sum().item()), mine.numel())
    dist.destroy_process_group()
    return out


def leaving_peer(rank, world, how):
    """The last rank leaves (how: "exception", "destroy", "exit") once the
    others have issued an all_reduce that needs it; they report how long
    after its leaving their wait() raised, and what a later call does."""
    init(rank, world)
    store = dist.distributed_c10d._get_default_store()
    leaver = world - 1
    dist.barrier()
    if rank == leaver:
        time.sleep(0.5)
        store.set("left_at", repr(time.time()))
        if how == "exception":
            raise RuntimeError("the leaving rank's own error")
        if how == "destroy":
            dist.destroy_process_group()
            # Alive, but gone from the group, while the others wait.
            time.sleep(8)
            return None
        sys.stdout.flush()
        os._exit(0)
    work = dist.all_reduce(torch.ones(4), async_op=True)
    try:
        work.wait()
        return None, "all_reduce completed although a rank had left", None
    except RuntimeError as e:
        failed_at = time.time()
        message = str(e)
    left_at = float(store.get("left_at").decode())
    later = None
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(4))
        later = "a later all_reduce completed"
    except RuntimeError as e:
        later = (time.monotonic() - start, str(e))
    return failed_at - left_at, message, later


def exit_with_pending_work(rank, world):
    """Rank 0 posts a receive that rank 1 never matches; rank 1 exits; rank 0
    then returns (the process ends with the group and its pending work still
    alive) and reports when it returned."""
    init(rank, world)
    dist.barrier()
    if rank == 1:
        sys.stdout.flush()
        os._exit(0)
    dist.irecv(torch.zeros(4), 1)
    time.sleep(0.5)
    return time.time()


def profiled(rank, world):
    """Every collective under torch's profiler; returns the names of the
    asynchronous events the backend recorded."""
    init(rank, world)
    t = torch.ones(8)
    with torch.autograd.profiler.profile() as prof:
        dist.all_reduce(t)
        dist.broadcast(t, 0)
        dist.reduce(t, 0)
        dist.all_gather([torch.empty(8) for _ in range(world)], t)
        dist.gather(t, [torch.empty(8) for _ in range(world)] if rank == 0 else None, 0)
        dist.scatter(t, [torch.ones(8) for _ in range(world)] if rank == 0 else None, 0)
        dist.reduce_scatter(torch.empty(8), [torch.ones(8) for _ in range(world)])
        dist.all_to_all_single(torch.empty(2 * world), torch.ones(2 * world))
        dist.barrier()
        if rank == 0:
            dist.send(t, 1)
        elif rank == 1:
            dist.recv(t, 0)
    names = sorted({e.name for e in prof.function_events if e.name.startswith("nnpccl:") and e.is_async})
    dist.destroy_process_group()
    return names


def monitored(rank, world):
    """The process group's monitored_barrier (torch's dist.monitored_barrier
    refuses every backend not named gloo): it passes when every rank comes,
    names the rank that does not, and leaves the group usable."""
    import datetime

    init(rank, world)
    pg = dist.distributed_c10d._get_default_group()
    pg.monitored_barrier(datetime.timedelta(seconds=20))
    error = None
    if rank == 0:
        try:
            pg.monitored_barrier(datetime.timedelta(seconds=0.5))
        except RuntimeError as e:
            error = str(e)
    t = torch.ones(2)
    dist.all_reduce(t)
    dist.destroy_process_group()
    return error, t.tolist()
