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
`dtype=` names it (needed for bfloat16, which has no buffer format). Output
buffers must be writable and C-contiguous. Every failure raises
`nnpccl.Error` (or a subclass) carrying the library's message.

The library is found through NNPCCL_LIBRARY (a path), then where `meson
install` put it, then the dynamic loader (libnnpccl.so.0).
"""

import ctypes
import ctypes.util
import os

__all__ = [
    "Error", "InvalidArgument", "InvalidUsage", "SystemError", "InternalError", "RemoteError", "TimeoutError",
    "Communicator", "Request", "get_unique_id", "version", "DATATYPES", "OPS",
]

# nnpccl_result_t
_SUCCESS, _IN_PROGRESS = 0, 7


class Error(RuntimeError):
    """A call failed; `code` is its nnpccl_result_t, the message the library's."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class InvalidArgument(Error, ValueError):
    """An argument was wrong; nothing happened and the communicator is still usable."""


class InvalidUsage(Error):
    """Not allowed in this state, or the ranks disagree about the call."""


class SystemError(Error):  # noqa: A001 - the library's name for it
    """The operating system or a library refused (memory, sockets, shared memory)."""


class InternalError(Error):
    """A bug in nnpccl."""


class RemoteError(Error):
    """A peer failed, died or aborted."""


class TimeoutError(Error):  # noqa: A001 - the library's name for it
    """A deadline passed while waiting for a peer (NNPCCL_TIMEOUT)."""


_ERRORS = {1: InvalidArgument, 2: InvalidUsage, 3: SystemError, 4: InternalError, 5: RemoteError, 6: TimeoutError}

# nnpccl_datatype_t, by name, and the buffer formats that imply one.
DATATYPES = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5, "float16": 6,
             "bfloat16": 7, "float32": 8, "float64": 9}
_SIZES = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 2, 8: 4, 9: 8}
_FORMATS = {("e", 2): 6, ("f", 4): 8, ("d", 8): 9}
_INT_FORMATS = {1: (0, 1), 4: (2, 3), 8: (4, 5)}  # signed, unsigned by size
OPS = {"sum": 0, "prod": 1, "min": 2, "max": 3, "avg": 4}

_UNIQUE_ID_BYTES = 128


class _UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * _UNIQUE_ID_BYTES)]


class _Config(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("timeout_sec", ctypes.c_int), ("chunk_bytes", ctypes.c_size_t),
                ("blocking", ctypes.c_int), ("algorithms", ctypes.c_char_p)]


def _installed_library():
    try:
        from ._install import LIBRARY  # written at install time
    except ImportError:  # running from the source tree
        return None
    return LIBRARY if os.path.exists(LIBRARY) else None


def _load():
    path = (os.environ.get("NNPCCL_LIBRARY") or _installed_library() or ctypes.util.find_library("nnpccl")
            or "libnnpccl.so.0")
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"nnpccl: cannot load {path} ({e}); install the library (meson install) or set "
                          "NNPCCL_LIBRARY to its path") from e
    c = ctypes
    vp, sz, i, comm, req = c.c_void_p, c.c_size_t, c.c_int, c.c_void_p, c.c_void_p
    signatures = {
        "nnpccl_get_version": [c.POINTER(i)],
        "nnpccl_get_unique_id": [c.POINTER(_UniqueId)],
        "nnpccl_comm_init_rank": [c.POINTER(comm), i, _UniqueId, i, c.POINTER(_Config)],
        "nnpccl_comm_init_from_env": [c.POINTER(comm), c.POINTER(_Config)],
        "nnpccl_comm_destroy": [comm],
        "nnpccl_comm_abort": [comm],
        "nnpccl_comm_rank": [comm, c.POINTER(i)],
        "nnpccl_comm_size": [comm, c.POINTER(i)],
        "nnpccl_comm_get_async_error": [comm, c.POINTER(i)],
        "nnpccl_allreduce": [vp, vp, sz, i, i, comm],
        "nnpccl_reduce_scatter": [vp, vp, sz, i, i, comm],
        "nnpccl_allgather": [vp, vp, sz, i, comm],
        "nnpccl_broadcast": [vp, vp, sz, i, i, comm],
        "nnpccl_reduce": [vp, vp, sz, i, i, i, comm],
        "nnpccl_gather": [vp, vp, sz, i, i, comm],
        "nnpccl_scatter": [vp, vp, sz, i, i, comm],
        "nnpccl_alltoall": [vp, vp, sz, i, comm],
        "nnpccl_barrier": [comm],
        "nnpccl_send": [vp, sz, i, i, comm],
        "nnpccl_recv": [vp, sz, i, i, comm],
        "nnpccl_iallreduce": [vp, vp, sz, i, i, comm, c.POINTER(req)],
        "nnpccl_ireduce_scatter": [vp, vp, sz, i, i, comm, c.POINTER(req)],
        "nnpccl_iallgather": [vp, vp, sz, i, comm, c.POINTER(req)],
        "nnpccl_ibroadcast": [vp, vp, sz, i, i, comm, c.POINTER(req)],
        "nnpccl_ireduce": [vp, vp, sz, i, i, i, comm, c.POINTER(req)],
        "nnpccl_igather": [vp, vp, sz, i, i, comm, c.POINTER(req)],
        "nnpccl_iscatter": [vp, vp, sz, i, i, comm, c.POINTER(req)],
        "nnpccl_ialltoall": [vp, vp, sz, i, comm, c.POINTER(req)],
        "nnpccl_ibarrier": [comm, c.POINTER(req)],
        "nnpccl_isend": [vp, sz, i, i, comm, c.POINTER(req)],
        "nnpccl_irecv": [vp, sz, i, i, comm, c.POINTER(req)],
        "nnpccl_wait": [req],
        "nnpccl_test": [req, c.POINTER(i)],
        "nnpccl_request_free": [req],
    }
    for name, args in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = c.c_int
    lib.nnpccl_get_last_error.argtypes = [comm]
    lib.nnpccl_get_last_error.restype = c.c_char_p
    lib.nnpccl_get_error_string.argtypes = [c.c_int]
    lib.nnpccl_get_error_string.restype = c.c_char_p
    return lib


_lib = _load()


def _check(rc, comm_handle=None):
    """Raises the library's error for a failed call's result `rc`."""
    if rc in (_SUCCESS, _IN_PROGRESS):
        return rc
    message = _lib.nnpccl_get_last_error(comm_handle)
    text = message.decode(errors="replace") if message else _lib.nnpccl_get_error_string(rc).decode()
    raise _ERRORS.get(rc, Error)(rc, text)


def version():
    """The library's version code: MAJOR*10000 + MINOR*100 + PATCH."""
    v = ctypes.c_int()
    _check(_lib.nnpccl_get_version(ctypes.byref(v)))
    return v.value


def get_unique_id():
    """A fresh rendezvous token (bytes) whose rank hosts the rendezvous; give
    it to every rank of the job. Treat it as a secret."""
    uid = _UniqueId()
    _check(_lib.nnpccl_get_unique_id(ctypes.byref(uid)))
    return bytes(uid)  # all 128 bytes: .internal would stop at the first NUL


class _Buffer:
    """A buffer's address, element count and datatype, and what keeps it alive."""

    def __init__(self, obj, dtype, writable, name):
        if dtype is not None and dtype not in DATATYPES:
            raise InvalidArgument(1, f"dtype={dtype!r} is not one of {', '.join(DATATYPES)}")
        try:
            view = memoryview(obj)
        except TypeError:
            raise InvalidArgument(1, f"{name} ({type(obj).__name__}) does not have the buffer protocol") from None
        if not view.c_contiguous:
            raise InvalidArgument(1, f"{name} is not C-contiguous")
        if writable and view.readonly:
            raise InvalidArgument(1, f"{name} is read-only, and the collective writes it")
        self.datatype = DATATYPES[dtype] if dtype is not None else _datatype_of(view, name)
        self.nbytes = view.nbytes
        size = _SIZES[self.datatype]
        if self.nbytes % size:
            raise InvalidArgument(1, f"{name} holds {self.nbytes} bytes, not a whole number of {size}-byte elements")
        self.count = self.nbytes // size
        self.keep = view
        self.copied = False
        if self.nbytes == 0:
            self.address = None
        elif view.readonly:
            # ctypes takes addresses of writable buffers only; a read-only
            # input is sent from a copy.
            self.keep = ctypes.create_string_buffer(view.tobytes(), self.nbytes)
            self.address = ctypes.addressof(self.keep)
            self.copied = True
        else:
            self.address = ctypes.addressof(ctypes.c_char.from_buffer(view.cast("B")))


def _datatype_of(view, name):
    fmt = view.format.lstrip("@=<>!")
    if (fmt, view.itemsize) in _FORMATS:
        return _FORMATS[(fmt, view.itemsize)]
    if fmt in "bhilq" and view.itemsize in _INT_FORMATS:
        return _INT_FORMATS[view.itemsize][0]
    if fmt in "BHILQ" and view.itemsize in _INT_FORMATS:
        return _INT_FORMATS[view.itemsize][1]
    raise InvalidArgument(1, f"{name} has elements of format {view.format!r} ({view.itemsize} bytes), which nnpccl "
                          f"has no datatype for; pass dtype= (one of {', '.join(DATATYPES)})")


def _op(op):
    if op not in OPS:
        raise InvalidArgument(1, f"op={op!r} is not one of {', '.join(OPS)}")
    return OPS[op]


class Request:
    """A nonblocking call in flight. Its buffers stay referenced until it
    has finished."""

    def __init__(self, comm, handle, keep, result):
        self._comm, self._handle, self._keep, self.result = comm, handle, keep, result

    def wait(self):
        """Blocks until the call has finished; returns its output buffer, or
        raises the call's error."""
        if self._handle is not None:
            handle, self._handle = self._handle, None
            _check(_lib.nnpccl_wait(handle), self._comm._handle)
            self._keep = None
        return self.result

    def test(self):
        """True once the call has finished (raising its error if it failed)."""
        if self._handle is None:
            return True
        done = ctypes.c_int()
        _check(_lib.nnpccl_test(self._handle, ctypes.byref(done)), self._comm._handle)
        if done.value:
            self._handle, self._keep = None, None
        return bool(done.value)

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            _lib.nnpccl_request_free(self._handle)


class Communicator:
    """One rank of a communicator. Calls from one thread at a time, as the C
    API requires; `destroy()` (or leaving a `with` block) ends it."""

    def __init__(self, nranks, unique_id, rank, timeout=None, chunk_bytes=None, algorithms=None, _from_env=False):
        config = _Config(ctypes.sizeof(_Config), int(timeout or 0), int(chunk_bytes or 0), 1,
                         algorithms.encode() if algorithms is not None else None)
        handle = ctypes.c_void_p()
        if _from_env:
            _check(_lib.nnpccl_comm_init_from_env(ctypes.byref(handle), ctypes.byref(config)))
        else:
            if not isinstance(unique_id, (bytes, bytearray)) or len(unique_id) != _UNIQUE_ID_BYTES:
                raise InvalidArgument(1, f"unique_id must be the {_UNIQUE_ID_BYTES} bytes get_unique_id() returned")
            uid = _UniqueId.from_buffer_copy(bytes(unique_id))
            _check(_lib.nnpccl_comm_init_rank(ctypes.byref(handle), int(nranks), uid, int(rank),
                                              ctypes.byref(config)))
        self._handle = handle
        r, n = ctypes.c_int(), ctypes.c_int()
        _check(_lib.nnpccl_comm_rank(handle, ctypes.byref(r)), handle)
        _check(_lib.nnpccl_comm_size(handle, ctypes.byref(n)), handle)
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
        if self._handle is not None:
            handle, self._handle = self._handle, None
            _check(_lib.nnpccl_comm_destroy(handle))

    def abort(self):
        """Ends the communicator at once; the other ranks' calls fail."""
        if self._handle is not None:
            handle, self._handle = self._handle, None
            _check(_lib.nnpccl_comm_abort(handle))

    def _live(self):
        if self._handle is None:
            raise InvalidUsage(2, "the communicator was destroyed or aborted")
        return self._handle

    def _run(self, name, args, keep, result, nonblocking):
        handle = self._live()
        if nonblocking:
            request = ctypes.c_void_p()
            _check(getattr(_lib, "nnpccl_i" + name)(*args, handle, ctypes.byref(request)), handle)
            return Request(self, request, keep, result)
        _check(getattr(_lib, "nnpccl_" + name)(*args, handle), handle)
        return result

    def _pair(self, send, recv, dtype):
        """The send and receive buffers of a call; recv None means in place."""
        s = _Buffer(send, dtype, False, "sendbuf")
        r = _Buffer(recv, dtype, True, "recvbuf") if recv is not None else s
        if recv is None and s.copied:
            raise InvalidArgument(1, "sendbuf is read-only, and in place the collective writes it")
        if r.datatype != s.datatype:
            raise InvalidArgument(1, "sendbuf and recvbuf hold different datatypes")
        return s, r

    def allreduce(self, send, recv=None, op="sum", dtype=None, nonblocking=False):
        """recv = the reduction of every rank's send (in place without recv)."""
        s, r = self._pair(send, recv, dtype)
        if r.count != s.count:
            raise InvalidArgument(1, f"recvbuf holds {r.count} elements, sendbuf {s.count}")
        return self._run("allreduce", (s.address, r.address, s.count, s.datatype, _op(op)), (s, r),
                         recv if recv is not None else send, nonblocking)

    def iallreduce(self, send, recv=None, op="sum", dtype=None):
        return self.allreduce(send, recv, op, dtype, nonblocking=True)

    def reduce_scatter(self, send, recv, op="sum", dtype=None, nonblocking=False):
        """recv (send's elements / size of them) = this rank's block of the reduction."""
        s, r = self._pair(send, recv, dtype)
        if s.count != r.count * self.size:
            raise InvalidArgument(1, f"sendbuf holds {s.count} elements, not {self.size} x recvbuf's {r.count}")
        return self._run("reduce_scatter", (s.address, r.address, r.count, s.datatype, _op(op)), (s, r), recv,
                         nonblocking)

    def ireduce_scatter(self, send, recv, op="sum", dtype=None):
        return self.reduce_scatter(send, recv, op, dtype, nonblocking=True)

    def allgather(self, send, recv, dtype=None, nonblocking=False):
        """recv (size x send's elements) = every rank's send, in rank order."""
        s, r = self._pair(send, recv, dtype)
        if r.count != s.count * self.size:
            raise InvalidArgument(1, f"recvbuf holds {r.count} elements, not {self.size} x sendbuf's {s.count}")
        return self._run("allgather", (s.address, r.address, s.count, s.datatype), (s, r), recv, nonblocking)

    def iallgather(self, send, recv, dtype=None):
        return self.allgather(send, recv, dtype, nonblocking=True)

    def broadcast(self, buf, root=0, dtype=None, nonblocking=False):
        """buf on every rank = root's buf (in place)."""
        b = _Buffer(buf, dtype, True, "buf")
        return self._run("broadcast", (b.address, b.address, b.count, b.datatype, int(root)), (b,), buf,
                         nonblocking)

    def ibroadcast(self, buf, root=0, dtype=None):
        return self.broadcast(buf, root, dtype, nonblocking=True)

    def reduce(self, send, recv=None, op="sum", root=0, dtype=None, nonblocking=False):
        """recv on root = the reduction of every rank's send (in place without recv)."""
        s, r = self._pair(send, recv, dtype)
        return self._run("reduce", (s.address, r.address, s.count, s.datatype, _op(op), int(root)), (s, r),
                         recv if recv is not None else send, nonblocking)

    def ireduce(self, send, recv=None, op="sum", root=0, dtype=None):
        return self.reduce(send, recv, op, root, dtype, nonblocking=True)

    def gather(self, send, recv=None, root=0, dtype=None, nonblocking=False):
        """recv on root (size x send's elements) = every rank's send; recv may be None elsewhere."""
        s = _Buffer(send, dtype, False, "sendbuf")
        r = _Buffer(recv, dtype, True, "recvbuf") if recv is not None else None
        if r is not None and r.datatype != s.datatype:
            raise InvalidArgument(1, "sendbuf and recvbuf hold different datatypes")
        if self.rank == root and (r is None or r.count != s.count * self.size):
            raise InvalidArgument(1, f"the root's recvbuf must hold {self.size} x sendbuf's {s.count} elements")
        return self._run("gather", (s.address, r.address if r else None, s.count, s.datatype, int(root)), (s, r),
                         recv, nonblocking)

    def igather(self, send, recv=None, root=0, dtype=None):
        return self.gather(send, recv, root, dtype, nonblocking=True)

    def scatter(self, send, recv, root=0, dtype=None, nonblocking=False):
        """recv = block `rank` of root's send (size x recv's elements); send may be None off the root."""
        r = _Buffer(recv, dtype, True, "recvbuf")
        s = _Buffer(send, dtype, False, "sendbuf") if send is not None else None
        if s is not None and r.datatype != s.datatype:
            raise InvalidArgument(1, "sendbuf and recvbuf hold different datatypes")
        if self.rank == root and (s is None or s.count != r.count * self.size):
            raise InvalidArgument(1, f"the root's sendbuf must hold {self.size} x recvbuf's {r.count} elements")
        return self._run("scatter", (s.address if s else None, r.address, r.count, r.datatype, int(root)), (s, r),
                         recv, nonblocking)

    def iscatter(self, send, recv, root=0, dtype=None):
        return self.scatter(send, recv, root, dtype, nonblocking=True)

    def alltoall(self, send, recv, dtype=None, nonblocking=False):
        """Block j of send goes to rank j's block `rank` of recv (both size x count elements)."""
        s, r = self._pair(send, recv, dtype)
        if s.count != r.count or s.count % self.size:
            raise InvalidArgument(1, f"sendbuf and recvbuf must hold the same {self.size} blocks")
        return self._run("alltoall", (s.address, r.address, s.count // self.size, s.datatype), (s, r), recv,
                         nonblocking)

    def ialltoall(self, send, recv, dtype=None):
        return self.alltoall(send, recv, dtype, nonblocking=True)

    def barrier(self, nonblocking=False):
        return self._run("barrier", (), (), None, nonblocking)

    def ibarrier(self):
        return self.barrier(nonblocking=True)

    def send(self, buf, peer, dtype=None, nonblocking=False):
        b = _Buffer(buf, dtype, False, "sendbuf")
        return self._run("send", (b.address, b.count, b.datatype, int(peer)), (b,), None, nonblocking)

    def isend(self, buf, peer, dtype=None):
        return self.send(buf, peer, dtype, nonblocking=True)

    def recv(self, buf, peer, dtype=None, nonblocking=False):
        b = _Buffer(buf, dtype, True, "recvbuf")
        return self._run("recv", (b.address, b.count, b.datatype, int(peer)), (b,), buf, nonblocking)

    def irecv(self, buf, peer, dtype=None):
        return self.recv(buf, peer, dtype, nonblocking=True)

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            _lib.nnpccl_comm_abort(self._handle)

