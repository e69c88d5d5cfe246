"""The package cannot crash its caller: a request keeps its buffers until its
call has finished, even when dropped unfinished; every size, root, peer and
dtype= is refused by the package before the library could run past a buffer;
a request's handle reaches the library once after it has finished, never
again. Each on 2 spawned ranks."""

import gc
import time
import weakref

import numpy as np
import pytest

import nnpccl
from ranks import run_ranks

N = 1 << 16


def dropped_unfinished_request(comm, end_with_destroy):
    if comm.rank == 1:
        time.sleep(0.3)  # rank 0's irecv is dropped before this send can complete it
        comm.send(np.full(N, 7, np.float32), 0)
        if end_with_destroy:
            return None
        comm.barrier()
        comm.barrier()
        return None
    buf = np.zeros(N, np.float32)
    alive = weakref.ref(buf)
    comm.irecv(buf, 1)  # the request is dropped at once
    del buf
    gc.collect()
    held_while_running = alive() is not None
    # Reuses memory a freed buffer would have had, so that the receive
    # would have written into these arrays.
    churn = [np.zeros(N, np.float32) for _ in range(16)]
    if end_with_destroy:
        comm.destroy()  # waits for the receive, then frees the parked request
    else:
        comm.barrier()  # done only once the earlier receive is: calls complete in order
        comm.barrier()  # its start frees the finished parked request
    gc.collect()
    return held_while_running, alive() is None, all(not c.any() for c in churn)


@pytest.mark.parametrize("end_with_destroy", [False, True], ids=["next-call", "destroy"])
def test_a_dropped_unfinished_request_keeps_its_buffer_until_its_call_has_finished(end_with_destroy):
    held, freed_after, churn_untouched = run_ranks(2, dropped_unfinished_request, end_with_destroy)[0]
    assert held, "the dropped request let its buffer go while the receive was still running"
    assert freed_after, "the buffer of a finished dropped request was never released"
    assert churn_untouched, "the receive wrote into memory it no longer owned"


def request_outlives_its_communicator(comm):
    if comm.rank == 1:
        time.sleep(0.2)
        comm.send(np.arange(10, dtype=np.int64), 0)
        return None
    req = comm.irecv(np.zeros(10, np.int64), 1)
    comm.destroy()  # waits for the receive
    return req.test(), req.wait().tolist(), req.test()


def test_a_request_outlives_its_communicator():
    done, got, still_done = run_ranks(2, request_outlives_its_communicator)[0]
    assert done and still_done
    assert got == list(range(10))


def _record_handle_calls(calls):
    """Wraps the library's request functions to record the handles they are given."""
    lib = nnpccl._library.lib
    for name in ("nnpccl_wait", "nnpccl_test", "nnpccl_request_free"):
        original = getattr(lib, name)

        def record(handle, *rest, _original=original, _name=name):
            calls.append((_name, handle.value if hasattr(handle, "value") else handle))
            return _original(handle, *rest)

        setattr(lib, name, record)


def failed_request_raises_once(comm):
    if comm.rank == 1:
        comm.barrier()
        time.sleep(0.2)
        comm.abort()  # rank 0's receive fails
        return None
    calls = []
    _record_handle_calls(calls)
    comm.barrier()
    req = comm.irecv(np.zeros(4, np.float32), 1)
    handle = req._handle.value
    deadline = time.monotonic() + 30
    with pytest.raises(nnpccl.Error) as raised:
        while not req.test():
            assert time.monotonic() < deadline, "the receive from an aborted rank never failed"
            time.sleep(0.01)
    test_calls = len(calls)
    assert req.test() and req.wait() is not None  # the failure was reported once; nothing left to free
    del req
    gc.collect()
    comm.abort()
    after_raise = [name for name, h in calls[test_calls:] if h == handle]
    return type(raised.value).__name__, after_raise


def test_a_request_whose_test_raised_is_never_given_to_the_library_again():
    kind, after_raise = run_ranks(2, failed_request_raises_once)[0]
    assert kind in ("RemoteError", "InvalidUsage"), kind
    assert after_raise == [], f"the finished request's handle was passed again to {after_raise}"


def checked_before_the_library(comm):
    r, n = comm.rank, comm.size
    x = np.ones(8, np.float32)
    invalid = nnpccl.InvalidArgument
    # The same refusals on every rank: sizes, roots, peers, ops.
    for call, match in [
        (lambda: comm.allreduce(x, np.zeros(7, np.float32)), "recvbuf holds 7 elements"),
        (lambda: comm.reduce_scatter(x, np.zeros(3, np.float32)), "sendbuf holds 8 elements"),
        (lambda: comm.allgather(x, np.zeros(8, np.float32)), "recvbuf holds 8 elements"),
        (lambda: comm.alltoall(np.ones(7, np.float32), np.zeros(7, np.float32)), "whole number of blocks"),
        (lambda: comm.alltoall(x, np.zeros(6, np.float32)), "recvbuf holds 6"),
        (lambda: comm.broadcast(x, root=n), f"root={n} is out of range"),
        (lambda: comm.broadcast(x, root=-1), "root=-1 is out of range"),
        (lambda: comm.ireduce(x, root=2**40), "root=1099511627776 is out of range"),
        (lambda: comm.gather(x, root=True), "root=True is not an int"),
        (lambda: comm.scatter(None, x, root=0.0), "root=0.0 is not an int"),
        (lambda: comm.send(x, r), f"peer={r} is this rank"),
        (lambda: comm.irecv(x, n + 3), f"peer={n + 3} is out of range"),
        (lambda: comm.allreduce(x, op=None), "op=None"),
        (lambda: comm.allreduce(x, dtype=8), "dtype=8"),
    ]:
        with pytest.raises(invalid, match=match):
            call()
    # The root's own buffers of reduce, gather and scatter: only the root
    # refuses, so only rank 1, the root here, calls.
    if r == 1:
        for call, match in [
            (lambda: comm.reduce(x, np.zeros(4, np.float32), root=1), "recvbuf holds 4 elements"),
            (lambda: comm.ireduce(x, np.zeros(16, np.float32), root=1), "recvbuf holds 16 elements"),
            (lambda: comm.gather(x, np.zeros(8, np.float32), root=1), "recvbuf holds 8 elements"),
            (lambda: comm.igather(x, None, root=1), "root's recvbuf is None"),
            (lambda: comm.scatter(np.zeros(8, np.float32), x, root=1), "sendbuf holds 8 elements"),
            (lambda: comm.iscatter(None, x, root=1), "root's sendbuf is None"),
        ]:
            with pytest.raises(invalid, match=match):
                call()
    # Still usable, and what a rank other than the root does not use is not checked.
    out = np.zeros(8, np.float32)
    comm.reduce(x, out if r == 1 else np.zeros(3, np.float32), root=1)
    gathered = np.zeros(16, np.float32) if r == 1 else None
    comm.gather(x * r, gathered, root=1)
    part = np.zeros(4, np.float32)
    comm.scatter(np.arange(8, dtype=np.float32) if r == 1 else None, part, root=1)
    if r == 1:
        assert np.all(out == n) and gathered.tolist() == [0.0] * 8 + [1.0] * 8
    assert part.tolist() == [4.0 * r + k for k in range(4)]


def test_sizes_roots_and_peers_are_refused_before_the_library_sees_them():
    run_ranks(2, checked_before_the_library, comm_timeout=20)


def dtype_must_fit_the_storage(comm):
    invalid = nnpccl.InvalidArgument
    for buf, dtype in [(np.zeros(4, np.float32), "bfloat16"), (np.zeros(4, np.float32), "int32"),
                       (np.zeros(4, np.int32), "uint32"), (np.zeros(4, np.float64), "int64"),
                       (np.zeros(4, np.uint16), "int32"), (np.zeros(4, np.float16), "bfloat16"),
                       (np.zeros(4, np.bool_), "uint8")]:
        with pytest.raises(invalid, match=f"dtype='{dtype}' does not fit"):
            comm.allreduce(buf, dtype=dtype)
    with pytest.raises(invalid, match="byte order"):
        comm.allreduce(np.zeros(4, ">f4"))
    # What storage may carry: float16 and bfloat16 on 16-bit integers, anything on bytes.
    half = np.full(4, 0x3C00, np.int16)  # 1.0 in float16
    comm.allreduce(half, dtype="float16")
    raw = bytearray(np.ones(3, np.float32).tobytes())
    comm.allreduce(raw, dtype="float32")
    same = np.ones(2, np.float64)
    comm.allreduce(same, dtype="float64")
    return half.tolist(), np.frombuffer(raw, np.float32).tolist(), same.tolist()


def test_a_dtype_override_must_fit_the_storage():
    for half, raw, same in run_ranks(2, dtype_must_fit_the_storage):
        assert half == [0x4000] * 4  # 2.0 in float16
        assert raw == [2.0] * 3
        assert same == [2.0] * 2
