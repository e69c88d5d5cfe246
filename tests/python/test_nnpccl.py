"""The nnpccl Python package as a user meets it: ranks in processes of their
own meeting through a unique id, every collective blocking and nonblocking
on numpy arrays and other buffers, exact results, and errors that carry the
library's message and leave the communicator usable."""

import multiprocessing as mp
import traceback

import numpy as np
import pytest

import nnpccl


def run_ranks(nranks, body, *args):
    """Runs body(comm, *args) on `nranks` spawned ranks; fails with the first rank's traceback."""
    uid = nnpccl.get_unique_id()
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_rank_main, args=(nranks, uid, r, body, args, results)) for r in range(nranks)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    failures = [text for ok, text in outcomes if not ok]
    assert not failures, failures[0]
    return sorted(text for _, text in outcomes)


def _rank_main(nranks, uid, rank, body, args, results):
    try:
        with nnpccl.Communicator(nranks, uid, rank, timeout=60) as comm:
            body(comm, *args)
        results.put((True, ""))
    except BaseException:  # the parent reports any rank's failure
        results.put((False, f"rank {rank}: {traceback.format_exc()}"))


def every_collective(comm, dtype):
    r, n = comm.rank, comm.size
    x = np.arange(12 * n, dtype=dtype) + r
    total = sum(np.arange(12 * n, dtype=dtype) + q for q in range(n))
    out = np.zeros_like(x)
    comm.allreduce(x, out)
    assert np.array_equal(out, total)
    y = x.copy()
    comm.allreduce(y, op="max")  # in place
    assert np.array_equal(y, np.arange(12 * n, dtype=dtype) + n - 1)
    block = np.zeros(12, dtype=dtype)
    comm.reduce_scatter(x, block)
    assert np.array_equal(block, total[12 * r:12 * (r + 1)])
    gathered = np.zeros(12 * n, dtype=dtype)
    comm.allgather(np.full(12, r, dtype=dtype), gathered)
    assert np.array_equal(gathered, np.repeat(np.arange(n, dtype=dtype), 12))
    b = np.full(5, r, dtype=dtype)
    comm.broadcast(b, root=n - 1)
    assert np.array_equal(b, np.full(5, n - 1, dtype=dtype))
    red = np.zeros_like(x)
    comm.reduce(x, red, op="sum", root=0)
    if r == 0:
        assert np.array_equal(red, total)
    g = np.zeros(3 * n, dtype=dtype) if r == 1 % n else None
    comm.gather(np.full(3, r, dtype=dtype), g, root=1 % n)
    if g is not None:
        assert np.array_equal(g, np.repeat(np.arange(n, dtype=dtype), 3))
    part = np.zeros(3, dtype=dtype)
    comm.scatter(np.repeat(np.arange(n, dtype=dtype), 3) if r == 0 else None, part, root=0)
    assert np.array_equal(part, np.full(3, r, dtype=dtype))
    a2a = np.zeros(2 * n, dtype=dtype)
    comm.alltoall(np.repeat(np.full(n, r, dtype=dtype), 2) + np.repeat(np.arange(n, dtype=dtype), 2) * 10, a2a)
    assert np.array_equal(a2a, np.repeat(np.arange(n, dtype=dtype), 2) + r * 10)
    comm.barrier()


@pytest.mark.parametrize("nranks", [2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8, np.int8, np.float16])
def test_every_collective_gives_exact_results(nranks, dtype):
    run_ranks(nranks, every_collective, dtype)


def nonblocking(comm):
    r, n = comm.rank, comm.size
    ins = [np.full(1000, r + k, dtype=np.float32) for k in range(4)]
    outs = [np.zeros(1000, dtype=np.float32) for _ in range(4)]
    requests = [comm.iallreduce(i, o) for i, o in zip(ins, outs)]
    requests.append(comm.ibarrier())
    for req in reversed(requests):
        req.wait()
    for k, o in enumerate(outs):
        assert np.all(o == sum(q + k for q in range(n)))
    # send and recv around the ring, posted both ways at once
    got = np.zeros(7, dtype=np.int64)
    s = comm.isend(np.full(7, r, dtype=np.int64), (r + 1) % n)
    v = comm.irecv(got, (r - 1) % n)
    while not v.test():
        pass
    s.wait()
    assert np.all(got == (r - 1) % n)


def test_nonblocking_calls_and_point_to_point():
    run_ranks(3, nonblocking)


def buffers_and_types(comm):
    r, n = comm.rank, comm.size
    # bytearray and array.array through the buffer protocol
    import array
    buf = bytearray([r + 1] * 16)
    comm.allreduce(buf)  # uint8
    assert bytes(buf) == bytes([n * (n + 1) // 2] * 16)
    arr = array.array("d", [r] * 4)
    comm.allreduce(arr, op="avg")
    assert list(arr) == [(n - 1) / 2] * 4
    # bfloat16 has no buffer format: uint16 storage and dtype=
    one = np.full(8, 0x3F80, dtype=np.uint16)  # 1.0 in bfloat16
    comm.allreduce(one, dtype="bfloat16")
    assert np.all(one == {2: 0x4000, 3: 0x4040}[n])  # 2.0, 3.0
    # a read-only input is sent from a copy
    out = np.zeros(4, dtype=np.float32)
    comm.allreduce(memoryview(np.ones(4, dtype=np.float32).tobytes()).cast("f"), out)
    assert np.all(out == n)


def test_buffers_and_datatypes():
    run_ranks(2, buffers_and_types)
    run_ranks(3, buffers_and_types)


def bad_input(comm):
    x = np.ones(4, dtype=np.float32)
    with pytest.raises(nnpccl.InvalidArgument, match="op='xor'"):
        comm.allreduce(x, op="xor")
    with pytest.raises(nnpccl.InvalidArgument, match="root=9"):
        comm.broadcast(x, root=9)  # the library's own check, with its message
    with pytest.raises(nnpccl.InvalidArgument, match="different datatypes"):
        comm.allreduce(x, np.zeros(4, dtype=np.float64))
    with pytest.raises(nnpccl.InvalidArgument, match="read-only"):
        comm.allreduce(memoryview(b"abcd"))
    with pytest.raises(nnpccl.InvalidArgument, match="no datatype"):
        comm.allreduce(np.ones(4, dtype=np.int16))
    with pytest.raises(nnpccl.InvalidArgument, match="C-contiguous"):
        comm.allreduce(np.ones((4, 4), dtype=np.float32)[:, 1])
    comm.allreduce(x)  # still usable
    assert np.all(x == comm.size)


def test_bad_input_raises_by_name_and_leaves_the_communicator_usable():
    run_ranks(2, bad_input)


def _dead_peer_rank(uid, rank):
    """Rank 1 dies without a goodbye; rank 0 exits 0 only if its calls then
    raise RemoteError naming rank 1."""
    import os
    comm = nnpccl.Communicator(2, uid, rank, timeout=60)
    if rank == 1:
        os._exit(0)
    try:
        for _ in range(100000):
            comm.allreduce(np.ones(1 << 14, dtype=np.float32))
    except nnpccl.RemoteError as e:
        os._exit(0 if "rank 1" in str(e) else 3)
    os._exit(2)


def test_a_dead_peer_raises_remote_error_naming_it():
    uid = nnpccl.get_unique_id()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_dead_peer_rank, args=(uid, r)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    assert procs[0].exitcode == 0, f"rank 0 exited {procs[0].exitcode}: no RemoteError naming rank 1"


def test_init_errors_carry_the_message():
    with pytest.raises(nnpccl.InvalidArgument, match="unique_id"):
        nnpccl.Communicator(2, b"short", 0)
    with pytest.raises(nnpccl.InvalidArgument, match="rank=5"):
        nnpccl.Communicator(2, nnpccl.get_unique_id(), 5)
