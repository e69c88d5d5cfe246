"""What each rank runs in the tests (a module of its own so that spawned
ranks can import it by name)."""

import datetime
import gc
import os
import signal
import threading
import time
import traceback

import torch
import torch.distributed as dist

import nnpccl_torch  # noqa: F401 - registers the backend

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int32, torch.int64]
REDOPS = {
    "SUM": dist.ReduceOp.SUM,
    "PRODUCT": dist.ReduceOp.PRODUCT,
    "MIN": dist.ReduceOp.MIN,
    "MAX": dist.ReduceOp.MAX,
    "AVG": dist.ReduceOp.AVG,
}
# Gloo in torch 1.13 has no bfloat16: its reference runs in float32, which
# holds every value below exactly.
GLOO_UNSUPPORTED = {torch.bfloat16: torch.float32}


def init(rank, world, **kwargs):
    dist.init_process_group("nnpccl", init_method="env://", rank=rank, world_size=world, **kwargs)


def data(rank, n, dtype, salt=0):
    """Small integers: every sum, product, min and max of up to 3 ranks is
    exact in every dtype, so any reduction order gives the same bits."""
    i = torch.arange(n, dtype=torch.int64)
    if dtype == torch.uint8:
        v = (i * 7 + rank * 3 + salt) % 5
    else:
        v = (i * 7 + rank * 3 + salt) % 9 - 4
    return v.to(dtype)


def random_floats(rank, n, dtype, salt=0):
    """Arbitrary floats: on 2 ranks every op is one commutative a+b, a*b,
    min or max, which any algorithm rounds alike."""
    g = torch.Generator().manual_seed(1000 * salt + rank)
    return (torch.randn(n, generator=g, dtype=torch.float64) * 100).to(dtype)


class Checker:
    def __init__(self, rank, world, gloo):
        self.rank, self.world, self.gloo = rank, world, gloo
        self.failures = []
        self.count = 0

    def expect(self, what, got, want):
        self.count += 1
        if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
            self.failures.append(f"rank {self.rank} {what}: got {got.tolist()} expected {want.tolist()}")

    def gloo_dtype(self, dtype):
        return GLOO_UNSUPPORTED.get(dtype, dtype)

    def ref_allreduce(self, t, opname):
        """The allreduce of t over the group by Gloo (AVG as SUM / world,
        since Gloo refuses AVG), in t's dtype."""
        ref = t.to(self.gloo_dtype(t.dtype), copy=True)
        op = dist.ReduceOp.SUM if opname == "AVG" else REDOPS[opname]
        dist.all_reduce(ref, op=op, group=self.gloo)
        if opname == "AVG":
            if ref.is_floating_point():
                # nnpccl divides float16/bfloat16 in float32, as torch does.
                ref = (ref.to(torch.float32) / self.world).to(t.dtype) if t.dtype in (torch.float16, torch.bfloat16) else ref / self.world
            else:
                ref = torch.div(ref, self.world, rounding_mode="trunc")
        return ref.to(t.dtype)


def reductions(c, dtype, opname, make, n):
    rank, world = c.rank, c.world
    op = REDOPS[opname]
    tag = f"{dtype} {opname}"
    x = make(rank, n, dtype)
    want = c.ref_allreduce(x, opname)

    t = x.clone()
    dist.all_reduce(t, op=op)
    c.expect(f"all_reduce {tag}", t, want)

    t = x.clone()
    work = dist.all_reduce(t, op=op, async_op=True)
    fut = work.get_future()
    work.wait()
    c.expect(f"all_reduce async {tag}", t, want)
    c.expect(f"all_reduce future value {tag}", fut.value()[0], want)
    if not work.is_completed():
        c.failures.append(f"rank {rank} {tag}: is_completed() false after wait()")

    ts = [x.clone(), make(rank, 3, dtype, salt=1)]
    dist.all_reduce_coalesced(ts, op=op)
    c.expect(f"all_reduce_coalesced[0] {tag}", ts[0], want)
    c.expect(f"all_reduce_coalesced[1] {tag}", ts[1], c.ref_allreduce(make(rank, 3, dtype, salt=1), opname))

    root = world - 1
    t = x.clone()
    dist.reduce(t, root, op=op)
    if rank == root:
        c.expect(f"reduce {tag}", t, want)

    # Gloo has no reduce_scatter: its reference is Gloo's allreduce, cut.
    big = make(rank, 4 * world, dtype, salt=2)
    full = c.ref_allreduce(big, opname)
    out = torch.empty(4, dtype=dtype)
    dist.reduce_scatter(out, list(big.split(4)), op=op)
    c.expect(f"reduce_scatter {tag}", out, full.split(4)[rank])
    out = torch.empty(4, dtype=dtype)
    dist._reduce_scatter_base(out, big.clone(), op=op)
    c.expect(f"_reduce_scatter_base {tag}", out, full.split(4)[rank])


def movements(c, dtype, n):
    """Ops that move data without reducing it, against Gloo."""
    rank, world, gloo = c.rank, c.world, c.gloo
    gd = c.gloo_dtype(dtype)

    def g(t):
        return t.to(gd, copy=True)

    x = data(rank, n, dtype) if not dtype.is_floating_point else random_floats(rank, n, dtype, salt=3)
    tag = str(dtype)

    t, ref = x.clone(), g(x)
    dist.broadcast(t, 1)
    dist.broadcast(ref, 1, group=gloo)
    c.expect(f"broadcast {tag}", t, ref.to(dtype))

    outs = [torch.empty(n, dtype=dtype) for _ in range(world)]
    refs = [torch.empty(n, dtype=gd) for _ in range(world)]
    dist.all_gather(outs, x)
    dist.all_gather(refs, g(x), group=gloo)
    for i in range(world):
        c.expect(f"all_gather[{i}] {tag}", outs[i], refs[i].to(dtype))
    flat = torch.empty(n * world, dtype=dtype)
    dist._all_gather_base(flat, x)
    c.expect(f"_all_gather_base {tag}", flat, torch.cat(refs).to(dtype))

    root = 0
    outs = [torch.empty(n, dtype=dtype) for _ in range(world)] if rank == root else None
    refs = [torch.empty(n, dtype=gd) for _ in range(world)] if rank == root else None
    dist.gather(x, outs, dst=root)
    dist.gather(g(x), refs, dst=root, group=gloo)
    if rank == root:
        for i in range(world):
            c.expect(f"gather[{i}] {tag}", outs[i], refs[i].to(dtype))

    root = world - 1
    pieces = [data(rank * 10 + i, n, dtype) for i in range(world)] if rank == root else None
    out, ref = torch.empty(n, dtype=dtype), torch.empty(n, dtype=gd)
    dist.scatter(out, pieces, src=root)
    dist.scatter(ref, [g(p) for p in pieces] if pieces else None, src=root, group=gloo)
    c.expect(f"scatter {tag}", out, ref.to(dtype))

    # all_to_all_single, equal blocks of 2 rows of 3.
    a = data(rank, world * 6, dtype, salt=4).view(world * 2, 3)
    out, ref = torch.empty_like(a), torch.empty_like(a, dtype=gd)
    dist.all_to_all_single(out, a)
    dist.all_to_all_single(ref, g(a), group=gloo)
    c.expect(f"all_to_all_single {tag}", out, ref.to(dtype))
    # Unequal splits: rank r sends r+p+1 rows to rank p.
    in_splits = [rank + p + 1 for p in range(world)]
    out_splits = [p + rank + 1 for p in range(world)]
    a = data(rank, sum(in_splits) * 3, dtype, salt=5).view(-1, 3)
    out = torch.empty(sum(out_splits), 3, dtype=dtype)
    ref = torch.empty(sum(out_splits), 3, dtype=gd)
    dist.all_to_all_single(out, a, out_splits, in_splits)
    dist.all_to_all_single(ref, g(a), out_splits, in_splits, group=gloo)
    c.expect(f"all_to_all_single unequal {tag}", out, ref.to(dtype))

    # Gloo has no all_to_all of tensor lists: block p of rank r is known.
    ins = [data(rank * 10 + p, 5, dtype) for p in range(world)]
    outs = [torch.empty(5, dtype=dtype) for _ in range(world)]
    dist.all_to_all(outs, ins)
    for i in range(world):
        c.expect(f"all_to_all[{i}] {tag}", outs[i], data(i * 10 + rank, 5, dtype))
    ins = [data(rank * 10 + p, rank + p + 1, dtype) for p in range(world)]
    outs = [torch.empty(rank + p + 1, dtype=dtype) for p in range(world)]
    dist.all_to_all(outs, ins)
    for i in range(world):
        c.expect(f"all_to_all unequal[{i}] {tag}", outs[i], data(i * 10 + rank, rank + i + 1, dtype))

    # A ring of send/recv, evens sending first so that blocking calls pair.
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    got = torch.empty(n, dtype=dtype)
    if rank % 2 == 0:
        dist.send(x, nxt)
        dist.recv(got, prv)
    else:
        dist.recv(got, prv)
        dist.send(x, nxt)
    want = data(prv, n, dtype) if not dtype.is_floating_point else random_floats(prv, n, dtype, salt=3)
    c.expect(f"send/recv {tag}", got, want)
    # isend/irecv both ways at once.
    got = torch.empty(n, dtype=dtype)
    works = [dist.isend(x, nxt), dist.irecv(got, prv)]
    for w in works:
        w.wait()
    c.expect(f"isend/irecv {tag}", got, want)


def ops_matrix(rank, world):
    """Every op x dtype x reduce op against Gloo in the same processes."""
    gloo = dist.new_group(backend="gloo")
    c = Checker(rank, world, gloo)
    for dtype in DTYPES:
        for opname in REDOPS:
            reductions(c, dtype, opname, data, 13)
            if world == 2 and dtype.is_floating_point:
                reductions(c, dtype, opname, random_floats, 13)
        # Beyond one pipelining chunk.
        if dtype in (torch.float32, torch.bfloat16):
            reductions(c, dtype, "SUM", data, 200003)
        movements(c, dtype, 7)
    dist.barrier()
    return c.count, c.failures


def _expect_error(failures, what, fn, *needles):
    try:
        fn()
    except RuntimeError as e:
        msg = str(e)
        missing = [s for s in needles if s not in msg]
        if missing:
            failures.append(f"{what}: the error does not say {missing}: {msg}")
        return msg
    failures.append(f"{what}: no error raised")
    return None


def unsupported(rank, world):
    """Bad input raises a Python error naming it, and leaves the group usable."""
    f = []
    for dtype, name in [(torch.bool, "torch.bool"), (torch.int16, "torch.int16")]:
        _expect_error(f, f"all_reduce {name}", lambda: dist.all_reduce(torch.zeros(4, dtype=dtype)), name)
        _expect_error(f, f"broadcast {name}", lambda: dist.broadcast(torch.zeros(4, dtype=dtype), 0), name)
    # torch.distributed hands complex tensors of sum, broadcast, gathers and
    # the like to the backend as their float view; what reaches the process
    # group itself is refused.
    pg = dist.distributed_c10d._get_default_group()
    _expect_error(f, "process group allreduce torch.complex64", lambda: pg.allreduce([torch.zeros(4, dtype=torch.complex64)]), "torch.complex64")
    z = torch.full((3,), complex(rank, 1), dtype=torch.complex64)
    dist.all_reduce(z)
    if not torch.equal(z, torch.full((3,), complex(sum(range(world)), world), dtype=torch.complex64)):
        f.append(f"rank {rank}: complex all_reduce through its float view gave {z.tolist()}")
    for op, name in [(dist.ReduceOp.BAND, "BAND"), (dist.ReduceOp.BOR, "BOR"), (dist.ReduceOp.BXOR, "BXOR")]:
        _expect_error(f, f"all_reduce {name}", lambda: dist.all_reduce(torch.zeros(4, dtype=torch.int32), op=op), name)
    premul = dist._make_nccl_premul_sum(2.0)
    _expect_error(f, "all_reduce PREMUL_SUM", lambda: dist.all_reduce(torch.zeros(4), op=premul), "PREMUL_SUM")
    _expect_error(f, "non-contiguous", lambda: dist.all_reduce(torch.zeros(8)[::2]), "not contiguous")
    # Sends and receives pair in order between two ranks; a tag that differs
    # fails that receive, naming both tags, and nothing else.
    if rank == 0:
        dist.send(torch.zeros(2), 1, tag=5)
    elif rank == 1:
        _expect_error(f, "recv tag mismatch", lambda: dist.recv(torch.zeros(2), 0, tag=6), "tag 5", "tag 6")
    _expect_error(f, "all_gather size", lambda: dist.all_gather([torch.zeros(3)] * world, torch.zeros(2)), "elements")
    _expect_error(f, "all_to_all_single rows", lambda: dist.all_to_all_single(torch.zeros(2 * world, 3), torch.zeros(2 * world, 4), [2] * world, [2] * world), "rows hold")
    _expect_error(f, "all_to_all_single splits", lambda: dist.all_to_all_single(torch.zeros(4), torch.zeros(4), [1] * world, [2] * world), "split sizes")
    t = torch.ones(4)
    dist.all_reduce(t)
    if not torch.equal(t, torch.full((4,), float(world))):
        f.append(f"rank {rank}: the group is not usable after the errors: {t.tolist()}")
    return f


def init_while_ticking(rank, world):
    """A process group whose last rank comes 1 s late, to init and then to
    a call: a Python thread must run meanwhile, as neither holds the GIL
    while it waits.
    (torch's own TCPStore set-up in init_process_group holds it, so the
    group is made directly, on the default group's store.)"""
    init(rank, world)
    f = []
    ticks = [0]
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.01)

    store = dist.PrefixStore("gil_test", dist.distributed_c10d._get_default_store())
    ticker = threading.Thread(target=tick)
    ticker.start()
    if rank == world - 1:
        time.sleep(1.0)
    pg = nnpccl_torch.ProcessGroupNnpccl(store, rank, world, datetime.timedelta(seconds=60))
    during_init = ticks[0]
    # And wait() on a call the last rank joins 1 s late.
    if rank == world - 1:
        time.sleep(1.0)
    t = torch.ones(3)
    pg.allreduce([t]).wait()
    stop.set()
    ticker.join()
    if rank == 0 and during_init < 20:
        f.append(f"rank 0: a Python thread ticked {during_init} times during a 1 s init; the GIL was held")
    if rank == 0 and ticks[0] - during_init < 20:
        f.append(f"rank 0: a Python thread ticked {ticks[0] - during_init} times during a 1 s wait(); the GIL was held")
    if t.tolist() != [float(world)] * 3:
        f.append(f"rank {rank}: allreduce on a directly made group gave {t.tolist()}")
    del pg
    return f


def released_by_callback(rank, world):
    """A future callback that drops a group's last reference runs on that
    group's completion thread: the group goes, its communicator with it."""
    f = []
    store = dist.PrefixStore("callback_test", dist.distributed_c10d._get_default_store())
    pg = nnpccl_torch.ProcessGroupNnpccl(store, rank, world, datetime.timedelta(seconds=60))
    with_group = len(os.listdir("/proc/self/fd"))
    holder = [pg]
    t = torch.ones(3)
    work = pg.allreduce([t])
    done = work.get_future().then(lambda _: holder.clear())
    del pg
    work.wait()
    done.wait()
    dist.barrier()  # the other ranks' callbacks ran too
    gc.collect()
    # The completion thread lets go of the communicator once the callback
    # has returned, a moment after done.wait() did.
    deadline = time.monotonic() + 5
    while len(os.listdir("/proc/self/fd")) >= with_group and time.monotonic() < deadline:
        time.sleep(0.01)
    if len(os.listdir("/proc/self/fd")) >= with_group:
        f.append(f"rank {rank}: the group's file descriptors stayed open after its callback released it")
    if t.tolist() != [float(world)] * 3:
        f.append(f"rank {rank}: allreduce gave {t.tolist()}")
    return f


def groups(rank, world, next_port):
    """new_group gets a communicator of its own; destroy and init again; the
    group's timeout is nnpccl's deadline."""
    f = []
    pair = dist.new_group([0, world - 1])
    everyone = dist.new_group(list(range(world)))
    if rank in (0, world - 1):
        t = torch.full((5,), float(rank + 1))
        dist.all_reduce(t, group=pair)
        if not torch.equal(t, torch.full((5,), float(world + 1))):
            f.append(f"rank {rank}: new_group([0, {world - 1}]) all_reduce gave {t.tolist()}")
        if dist.get_world_size(pair) != 2:
            f.append(f"rank {rank}: pair group has size {dist.get_world_size(pair)}")
    t = torch.full((3,), float(rank))
    dist.all_reduce(t, group=everyone, op=dist.ReduceOp.MAX)
    if not torch.equal(t, torch.full((3,), float(world - 1))):
        f.append(f"rank {rank}: second full group gave {t.tolist()}")
    if dist.get_backend(everyone) != "nnpccl":
        f.append(f"rank {rank}: backend of new_group is {dist.get_backend(everyone)}")
    dist.destroy_process_group()
    del pair, everyone
    gc.collect()
    fds = len(os.listdir("/proc/self/fd"))

    # A second default group, on a new store.
    os.environ["MASTER_PORT"] = str(next_port)
    init(rank, world)
    t = torch.ones(2, dtype=torch.int64)
    dist.all_reduce(t)
    if t.tolist() != [world, world]:
        f.append(f"rank {rank}: all_reduce after re-init gave {t.tolist()}")

    # The group's timeout is nnpccl's deadline: a recv nobody sends to fails.
    short = dist.new_group(list(range(world)), timeout=datetime.timedelta(seconds=2))
    if rank == 0:
        start = time.monotonic()
        msg = _expect_error(f, "recv past the group's timeout", lambda: dist.recv(torch.zeros(1), 1, group=short), "nnpccl")
        took = time.monotonic() - start
        if msg is not None and not (1.5 < took < 10):
            f.append(f"rank 0: the 2 s timeout fired after {took:.1f} s")
    dist.barrier()
    dist.destroy_process_group()
    # Destroying the groups closed everything they opened (sockets, memfds,
    # eventfds), even the communicator that had failed.
    del short
    gc.collect()
    left = len(os.listdir("/proc/self/fd")) - fds
    if left > 0:
        f.append(f"rank {rank}: {left} more file descriptors open after a second init and destroy")
    return f


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))

    def forward(self, x):
        return self.net(x)


def train_ddp(rank, group, steps, die_at=None, python_hook=False):
    torch.manual_seed(1234 + rank)  # DDP must make the replicas equal itself
    model = torch.nn.parallel.DistributedDataParallel(MLP(), process_group=group, bucket_cap_mb=0.01)
    if python_hook:
        # Its future's then() callback is Python, run on the backend's
        # completion thread, which must then take the GIL.
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        model.register_comm_hook(group, default_hooks.allreduce_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(99 + rank)
    for step in range(steps):
        if step == die_at:
            return model
        x = torch.randn(32, 16, generator=g)
        y = torch.randn(32, 4, generator=g)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return model


def ddp(rank, world):
    """50 steps of DDP over nnpccl and over Gloo: bit-identical parameters.
    Also with DDP's Python allreduce hook, which computes the same."""
    gloo = dist.new_group(backend="gloo")
    ours = train_ddp(rank, None, 50)
    theirs = train_ddp(rank, gloo, 50)
    hooked = train_ddp(rank, None, 50, python_hook=True)
    f = []

    def flat(model):
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    mine, ref = flat(ours), flat(theirs)
    if not torch.equal(mine, ref):
        f.append(f"rank {rank}: nnpccl and Gloo parameters differ in {(mine != ref).sum().item()} of {mine.numel()} values")
    if not torch.equal(flat(hooked), ref):
        f.append(f"rank {rank}: with the Python comm hook, parameters differ from Gloo's")
    everyone = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(everyone, mine, group=gloo)
    for r in range(world):
        if not torch.equal(everyone[r], mine):
            f.append(f"rank {rank}: parameters differ from rank {r}'s")
    return f


def session(rank, world, sections, next_port):
    """One job for several tests: starting ranks (each imports torch) costs
    more than most checks. Returns {section: its result or its traceback}.
    groups, which ends the default group, must come last."""
    out = {"init": init_while_ticking(rank, world)}
    for name in sections:
        try:
            if name == "groups":
                out[name] = groups(rank, world, next_port)
            else:
                out[name] = globals()[name](rank, world)
        except Exception:  # noqa: B902 - reported as that section's failure
            out[name] = ["rank %d raised:\n%s" % (rank, traceback.format_exc())]
    if dist.is_initialized():
        dist.destroy_process_group()
    return out


def killed(rank, world, victim):
    """The victim dies mid-training; the others report how soon they knew."""
    init(rank, world)
    if rank == victim:
        train_ddp(rank, None, 1000, die_at=5)
        # Published before dying, through the store every rank shares.
        store = dist.distributed_c10d._get_default_store()
        store.set("killed_at", repr(time.time()))
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        train_ddp(rank, None, 100000)
    except RuntimeError as e:
        failed_at = time.time()
        store = dist.distributed_c10d._get_default_store()
        killed_at = float(store.get("killed_at").decode())
        msg = str(e)
        # Rank 0 hosts the store: it stays until every survivor has read it.
        store.add("read_killed_at", 1)
        deadline = time.monotonic() + 30
        while rank == 0 and store.add("read_killed_at", 0) < world - 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        dist.destroy_process_group()
        return failed_at - killed_at, msg
    return None, "training finished although a rank died"


def spawned(rank, world, port, out_dir):
    """torch.multiprocessing.spawn's entry: init, one all_reduce, destroy;
    the result goes to a file, as spawn returns nothing."""
    os.environ["NNPCCL_SOCKET_IFNAME"] = "lo"
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)
    dist.init_process_group("nnpccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    t = torch.full((3,), float(rank + 1))
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{rank}"), "w") as f:
        f.write(repr(t.tolist()))
