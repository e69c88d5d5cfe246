"""nnpccl from Python: ctypes over libnnpccl's C API (include/nnpccl.h), no
compile step.

    import numpy as np, nnpccl
    uid = nnpccl.get_unique_id()             # on one rank; hand the bytes to the others
    comm = nnpccl.Communicator(nranks, uid, rank)
    # or: comm = nnpccl.Communicator.from_env()   (torchrun, mpirun, srun)
    grads = np.ones(1024, dtype=np.float32)
    comm.allreduce(grads)                    # in place; op="sum" by default
    req = comm.iallreduce(grads, op="avg")   # nonblocking: req.wait() or req.test()
    comm.destroy()

Buffers are numpy arrays or any object with the buffer protocol (bytearray,
memoryview, array.array, ...); the datatype comes from the buffer unless
`dtype=` names it, which it may only where the storage can carry it: its
own datatype, float16 or bfloat16 on 16-bit integers (bfloat16 has no
buffer format), any datatype on bytes. Output buffers must be writable and
C-contiguous. Every size, datatype, root and peer is checked before the
library sees it; every failure raises `nnpccl.Error` (or a subclass)
carrying the library's message, and after an `InvalidArgument` the
communicator is still usable.

A nonblocking call's buffers stay referenced (and so cannot be freed or
resized) until the call has finished. A request dropped unfinished is not
freed under running work: its communicator keeps it and frees it once it
has finished (checked at the communicator's next call), at destroy()/abort,
or at interpreter exit, where a communicator with unfinished work is
aborted so that the process exits at once, and one without is destroyed.

The library is found through NNPCCL_LIBRARY (a path), then the one the
package was built for (the build tree's libnnpccl when imported from
build/python, the installed one after `meson install`), then the dynamic
loader (libnnpccl.so.0).
"""

import atexit
import ctypes
import numbers
import weakref

from ._buffers import DATATYPES, Buffer, same_datatype
from ._library import (IN_PROGRESS, SUCCESS, UNIQUE_ID_BYTES, Config, Error, InternalError, InvalidArgument,
                       InvalidUsage, RemoteError, SystemError, TimeoutError, UniqueId, check, invalid, lib)

__all__ = [
    "Error", "InvalidArgument", "InvalidUsage", "SystemError", "InternalError", "RemoteError", "TimeoutError",
    "Communicator", "Request", "get_unique_id", "version", "DATATYPES", "OPS",
]

OPS = {"sum": 0, "prod": 1, "min": 2, "max": 3, "avg": 4}

# Tracebacks name the errors as users import them: nnpccl.RemoteError.
for _error in (Error, InvalidArgument, InvalidUsage, SystemError, InternalError, RemoteError, TimeoutError):
    _error.__module__ = __name__


def version():
    """The library's version code: MAJOR*10000 + MINOR*100 + PATCH."""
    v = ctypes.c_int()
    check(lib.nnpccl_get_version(ctypes.byref(v)))
    return v.value


def get_unique_id():
    """A fresh rendezvous token (bytes) whose rank hosts the rendezvous; give
    it to every rank of the job. Treat it as a secret."""
    uid = UniqueId()
    check(lib.nnpccl_get_unique_id(ctypes.byref(uid)))
    return bytes(uid)  # all 128 bytes: .internal would stop at the first NUL


def _op(op):
    if not isinstance(op, str) or op not in OPS:
        raise invalid(f"op={op!r} is not one of {', '.join(OPS)}")
    return OPS[op]


class Request:
    """A nonblocking call in flight. Its buffers stay referenced until it has
    finished; use it from one thread at a time."""

    def __init__(self, comm, handle, keep, result):
        self._comm, self._handle, self._keep, self.result = comm, handle, keep, result
        comm._requests.add(self)

    def _finished(self):
        self._handle, self._keep = None, None
        self._comm._requests.discard(self)

    def wait(self):
        """Blocks until the call has finished; returns its output buffer, or
        raises the call's error."""
        if self._handle is not None:
            handle, self._handle = self._handle, None
            try:
                # The library frees the request whatever the result.
                rc = lib.nnpccl_wait(handle)
            finally:
                self._finished()
            check(rc, self._comm._handle)
        return self.result

    def test(self):
        """True once the call has finished (raising its error if it failed)."""
        if self._handle is None:
            return True
        done = ctypes.c_int()
        rc = lib.nnpccl_test(self._handle, ctypes.byref(done))
        # Done, or refused as no live request: either way the library no
        # longer holds the handle, so it is dropped before any raise.
        if done.value or rc not in (SUCCESS, IN_PROGRESS):
            self._finished()
        check(rc, self._comm._handle)
        return bool(done.value)

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle is not None:
            self._handle = None
            self._comm._park(handle, self._keep)


# Every communicator not yet destroyed, for the exit handler.
_open_communicators = weakref.WeakSet()


@atexit.register
def _end_at_exit():
    for comm in list(_open_communicators):
        comm._end_unattended()


class Communicator:
    """One rank of a communicator. Calls from one thread at a time, as the C
    API requires; `destroy()` (or leaving a `with` block) ends it."""

    def __init__(self, nranks, unique_id, rank, timeout=None, chunk_bytes=None, algorithms=None, _from_env=False):
        self._handle = None
        # Kept on the instance: __del__ may run at interpreter exit, after
        # the module's globals have been cleared.
        self._lib = lib
        self._requests = weakref.WeakSet()  # unfinished requests the caller still holds
        self._parked = []  # (handle, buffers) of unfinished requests the caller dropped
        # True once destroy or abort has returned: only then are every call's
        # buffers free. While either runs (the GIL released), a request
        # dropped meanwhile is parked, not freed under the running call.
        self._ended = False
        config = Config(ctypes.sizeof(Config), _nonnegative(timeout, "timeout"),
                        _nonnegative(chunk_bytes, "chunk_bytes"), 1,
                        algorithms.encode() if algorithms is not None else None)
        handle = ctypes.c_void_p()
        if _from_env:
            check(lib.nnpccl_comm_init_from_env(ctypes.byref(handle), ctypes.byref(config)))
        else:
            if not isinstance(unique_id, (bytes, bytearray)) or len(unique_id) != UNIQUE_ID_BYTES:
                raise invalid(f"unique_id must be the {UNIQUE_ID_BYTES} bytes get_unique_id() returned")
            for value, name in ((nranks, "nranks"), (rank, "rank")):
                if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not -2**31 <= value < 2**31:
                    raise invalid(f"{name}={value!r} is not an int")
            uid = UniqueId.from_buffer_copy(bytes(unique_id))
            check(lib.nnpccl_comm_init_rank(ctypes.byref(handle), int(nranks), uid, int(rank), ctypes.byref(config)))
        self._handle = handle
        _open_communicators.add(self)
        r, n = ctypes.c_int(), ctypes.c_int()
        check(lib.nnpccl_comm_rank(handle, ctypes.byref(r)), handle)
        check(lib.nnpccl_comm_size(handle, ctypes.byref(n)), handle)
        self.rank, self.size = r.value, n.value

    @classmethod
    def from_env(cls, timeout=None, chunk_bytes=None, algorithms=None):
        """The communicator a launcher's environment describes (torchrun's
        RANK/WORLD_SIZE/MASTER_ADDR, Open MPI, MPICH, Slurm)."""
        return cls(None, None, None, timeout, chunk_bytes, algorithms, _from_env=True)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is None:
            self.destroy()
        else:
            self.abort()

    def destroy(self):
        """Finishes every pending call, then frees the communicator."""
        self._end(self._lib.nnpccl_comm_destroy)

    def abort(self):
        """Ends the communicator at once: its pending calls fail here, and
        the other ranks' calls that need this one fail."""
        self._end(self._lib.nnpccl_comm_abort)

    def _end(self, how):
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        _open_communicators.discard(self)
        try:
            rc = how(handle)
        finally:
            # Destroy and abort finish every operation before they free the
            # communicator, so the dropped requests' buffers are free now.
            self._ended = True
            self._reap(ended=True)
        check(rc)

    def _end_unattended(self):
        """Ends a communicator nobody destroyed: destroyed when no call is
        unfinished, else aborted, since a destroy would wait for peers that
        may never come."""
        if self._handle is None:
            return
        unfinished = bool(self._parked) or any(r._handle is not None for r in list(self._requests))
        try:
            self.abort() if unfinished else self.destroy()
        except Error:
            pass

    def _park(self, handle, keep):
        """Keeps a dropped request's handle and buffers until its call has finished."""
        if self._ended:
            self._lib.nnpccl_request_free(handle)  # the communicator has ended: the call is over
        else:
            self._parked.append((handle, keep))

    def _reap(self, ended=False):
        """Frees the dropped requests that have finished (all of them once the
        communicator has ended); a failed one's error is the communicator's."""
        parked, self._parked = self._parked, []
        for handle, keep in parked:
            if ended:
                self._lib.nnpccl_request_free(handle)
                continue
            done = ctypes.c_int()
            if self._lib.nnpccl_test(handle, ctypes.byref(done)) in (SUCCESS, IN_PROGRESS) and not done.value:
                self._parked.append((handle, keep))

    def _live(self):
        if self._handle is None:
            raise InvalidUsage(2, "the communicator was destroyed or aborted")
        if self._parked:
            self._reap()
        return self._handle

    def _rank_argument(self, value, name):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise invalid(f"{name}={value!r} is not an int")
        if not 0 <= value < self.size:
            raise invalid(f"{name}={value} is out of range: the communicator has ranks 0..{self.size - 1}")
        return int(value)

    def _run(self, name, args, keep, result, nonblocking):
        handle = self._live()
        if nonblocking:
            request = ctypes.c_void_p()
            check(getattr(lib, "nnpccl_i" + name)(*args, handle, ctypes.byref(request)), handle)
            return Request(self, request, keep, result)
        check(getattr(lib, "nnpccl_" + name)(*args, handle), handle)
        return result

    def _pair(self, send, recv, dtype):
        """The send and receive buffers of a call; recv None means in place."""
        s = Buffer(send, dtype, False, "sendbuf")
        if recv is None:
            if s.copied:
                raise invalid("sendbuf is read-only, and in place the call writes it")
            return s, s
        r = Buffer(recv, dtype, True, "recvbuf")
        same_datatype(s, r)
        return s, r

    def allreduce(self, send, recv=None, op="sum", dtype=None, nonblocking=False):
        """recv = the reduction of every rank's send (in place without recv)."""
        s, r = self._pair(send, recv, dtype)
        r.expect(s.count, "as sendbuf's count,")
        return self._run("allreduce", (s.address, r.address, s.count, s.datatype, _op(op)), (s, r),
                         recv if recv is not None else send, nonblocking)

    def iallreduce(self, send, recv=None, op="sum", dtype=None):
        return self.allreduce(send, recv, op, dtype, nonblocking=True)

    def reduce_scatter(self, send, recv, op="sum", dtype=None, nonblocking=False):
        """recv (send's elements / size of them) = this rank's block of the reduction."""
        s, r = self._pair(send, recv, dtype)
        s.expect(r.count * self.size, f"as {self.size} ranks x recvbuf's {r.count},")
        return self._run("reduce_scatter", (s.address, r.address, r.count, s.datatype, _op(op)), (s, r), recv,
                         nonblocking)

    def ireduce_scatter(self, send, recv, op="sum", dtype=None):
        return self.reduce_scatter(send, recv, op, dtype, nonblocking=True)

    def allgather(self, send, recv, dtype=None, nonblocking=False):
        """recv (size x send's elements) = every rank's send, in rank order."""
        s, r = self._pair(send, recv, dtype)
        r.expect(s.count * self.size, f"as {self.size} ranks x sendbuf's {s.count},")
        return self._run("allgather", (s.address, r.address, s.count, s.datatype), (s, r), recv, nonblocking)

    def iallgather(self, send, recv, dtype=None):
        return self.allgather(send, recv, dtype, nonblocking=True)

    def broadcast(self, buf, root=0, dtype=None, nonblocking=False):
        """buf on every rank = root's buf (in place)."""
        root = self._rank_argument(root, "root")
        b = Buffer(buf, dtype, True, "buf")
        return self._run("broadcast", (b.address, b.address, b.count, b.datatype, root), (b,), buf, nonblocking)

    def ibroadcast(self, buf, root=0, dtype=None):
        return self.broadcast(buf, root, dtype, nonblocking=True)

    def reduce(self, send, recv=None, op="sum", root=0, dtype=None, nonblocking=False):
        """recv on root = the reduction of every rank's send (in place without
        recv); recv is not written elsewhere."""
        root = self._rank_argument(root, "root")
        s, r = self._pair(send, recv, dtype)
        if self.rank == root:
            r.expect(s.count, "on the root, as sendbuf's count,")
        return self._run("reduce", (s.address, r.address, s.count, s.datatype, _op(op), root), (s, r),
                         recv if recv is not None else send, nonblocking)

    def ireduce(self, send, recv=None, op="sum", root=0, dtype=None):
        return self.reduce(send, recv, op, root, dtype, nonblocking=True)

    def gather(self, send, recv=None, root=0, dtype=None, nonblocking=False):
        """recv on root (size x send's elements) = every rank's send; recv may be None elsewhere."""
        root = self._rank_argument(root, "root")
        s = Buffer(send, dtype, False, "sendbuf")
        r = Buffer(recv, dtype, True, "recvbuf") if recv is not None else None
        same_datatype(s, r)
        if self.rank == root:
            if r is None:
                raise invalid(f"the root's recvbuf is None; it must hold {self.size} x sendbuf's {s.count} elements")
            r.expect(s.count * self.size, f"on the root, as {self.size} ranks x sendbuf's {s.count},")
        return self._run("gather", (s.address, r.address if r else None, s.count, s.datatype, root), (s, r), recv,
                         nonblocking)

    def igather(self, send, recv=None, root=0, dtype=None):
        return self.gather(send, recv, root, dtype, nonblocking=True)

    def scatter(self, send, recv, root=0, dtype=None, nonblocking=False):
        """recv = block `rank` of root's send (size x recv's elements); send may be None off the root."""
        root = self._rank_argument(root, "root")
        r = Buffer(recv, dtype, True, "recvbuf")
        s = Buffer(send, dtype, False, "sendbuf") if send is not None else None
        same_datatype(s, r)
        if self.rank == root:
            if s is None:
                raise invalid(f"the root's sendbuf is None; it must hold {self.size} x recvbuf's {r.count} elements")
            s.expect(r.count * self.size, f"on the root, as {self.size} ranks x recvbuf's {r.count},")
        return self._run("scatter", (s.address if s else None, r.address, r.count, r.datatype, root), (s, r), recv,
                         nonblocking)

    def iscatter(self, send, recv, root=0, dtype=None):
        return self.scatter(send, recv, root, dtype, nonblocking=True)

    def alltoall(self, send, recv, dtype=None, nonblocking=False):
        """Block j of send goes to rank j's block `rank` of recv (both size x count elements)."""
        s, r = self._pair(send, recv, dtype)
        if s.count % self.size:
            raise invalid(f"sendbuf holds {s.count} elements, not a whole number of blocks for {self.size} ranks")
        r.expect(s.count, "as sendbuf's count,")
        return self._run("alltoall", (s.address, r.address, s.count // self.size, s.datatype), (s, r), recv,
                         nonblocking)

    def ialltoall(self, send, recv, dtype=None):
        return self.alltoall(send, recv, dtype, nonblocking=True)

    def barrier(self, nonblocking=False):
        return self._run("barrier", (), (), None, nonblocking)

    def ibarrier(self):
        return self.barrier(nonblocking=True)

    def _peer(self, peer):
        peer = self._rank_argument(peer, "peer")
        if peer == self.rank:
            raise invalid(f"peer={peer} is this rank: a rank cannot send to or receive from itself")
        return peer

    def send(self, buf, peer, dtype=None, nonblocking=False):
        peer = self._peer(peer)
        b = Buffer(buf, dtype, False, "sendbuf")
        return self._run("send", (b.address, b.count, b.datatype, peer), (b,), None, nonblocking)

    def isend(self, buf, peer, dtype=None):
        return self.send(buf, peer, dtype, nonblocking=True)

    def recv(self, buf, peer, dtype=None, nonblocking=False):
        peer = self._peer(peer)
        b = Buffer(buf, dtype, True, "recvbuf")
        return self._run("recv", (b.address, b.count, b.datatype, peer), (b,), buf, nonblocking)

    def irecv(self, buf, peer, dtype=None):
        return self.recv(buf, peer, dtype, nonblocking=True)

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            self._end_unattended()


def _nonnegative(value, name):
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= value < 2**31:
        raise invalid(f"{name}={value!r} is not an int from 0 up")
    return int(value)
