"""libnnpccl through ctypes: finding and loading it, the C API's signatures,
and turning its results into the package's exceptions."""

import ctypes
import ctypes.util
import os

# nnpccl_result_t
SUCCESS, IN_PROGRESS = 0, 7
UNIQUE_ID_BYTES = 128


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
    """A peer failed, died, aborted or left."""


class TimeoutError(Error):  # noqa: A001 - the library's name for it
    """A deadline passed while waiting for a peer (NNPCCL_TIMEOUT)."""


_ERRORS = {1: InvalidArgument, 2: InvalidUsage, 3: SystemError, 4: InternalError, 5: RemoteError, 6: TimeoutError}


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


class Config(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("timeout_sec", ctypes.c_int), ("chunk_bytes", ctypes.c_size_t),
                ("blocking", ctypes.c_int), ("algorithms", ctypes.c_char_p)]


def _installed_library():
    try:
        from ._install import LIBRARY  # written by meson: the build tree's library, or the installed one
    except ImportError:  # the source tree's package
        return None
    return LIBRARY if os.path.exists(LIBRARY) else None


def _signatures():
    c = ctypes
    vp, sz, i, comm, req = c.c_void_p, c.c_size_t, c.c_int, c.c_void_p, c.c_void_p
    blocking = {
        "allreduce": [vp, vp, sz, i, i, comm],
        "reduce_scatter": [vp, vp, sz, i, i, comm],
        "allgather": [vp, vp, sz, i, comm],
        "broadcast": [vp, vp, sz, i, i, comm],
        "reduce": [vp, vp, sz, i, i, i, comm],
        "gather": [vp, vp, sz, i, i, comm],
        "scatter": [vp, vp, sz, i, i, comm],
        "alltoall": [vp, vp, sz, i, comm],
        "barrier": [comm],
        "send": [vp, sz, i, i, comm],
        "recv": [vp, sz, i, i, comm],
    }
    signatures = {
        "nnpccl_get_version": [c.POINTER(i)],
        "nnpccl_get_unique_id": [c.POINTER(UniqueId)],
        "nnpccl_comm_init_rank": [c.POINTER(comm), i, UniqueId, i, c.POINTER(Config)],
        "nnpccl_comm_init_from_env": [c.POINTER(comm), c.POINTER(Config)],
        "nnpccl_comm_destroy": [comm],
        "nnpccl_comm_abort": [comm],
        "nnpccl_comm_rank": [comm, c.POINTER(i)],
        "nnpccl_comm_size": [comm, c.POINTER(i)],
        "nnpccl_comm_get_async_error": [comm, c.POINTER(i)],
        "nnpccl_wait": [req],
        "nnpccl_test": [req, c.POINTER(i)],
        "nnpccl_request_free": [req],
    }
    for name, args in blocking.items():
        signatures["nnpccl_" + name] = args
        signatures["nnpccl_i" + name] = args + [c.POINTER(req)]
    return signatures


def load():
    """The library: NNPCCL_LIBRARY (a path), then the one meson's _install.py
    names (the build tree's or the installed one), then the dynamic loader."""
    path = (os.environ.get("NNPCCL_LIBRARY") or _installed_library() or ctypes.util.find_library("nnpccl")
            or "libnnpccl.so.0")
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"nnpccl: cannot load {path} ({e}); build the library (meson compile) and import the "
                          "package from build/python, install it (meson install), or set NNPCCL_LIBRARY to its "
                          "path") from e
    for name, args in _signatures().items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = ctypes.c_int
    lib.nnpccl_get_last_error.argtypes = [ctypes.c_void_p]
    lib.nnpccl_get_last_error.restype = ctypes.c_char_p
    lib.nnpccl_get_error_string.argtypes = [ctypes.c_int]
    lib.nnpccl_get_error_string.restype = ctypes.c_char_p
    return lib


lib = load()


def check(rc, comm_handle=None):
    """Raises the library's error for a failed call's result `rc`: the
    communicator's message, else this thread's, else the code's name."""
    if rc in (SUCCESS, IN_PROGRESS):
        return rc
    message = lib.nnpccl_get_last_error(comm_handle) if comm_handle is not None else b""
    if not message:
        message = lib.nnpccl_get_last_error(None)
    text = message.decode(errors="replace") if message else lib.nnpccl_get_error_string(rc).decode()
    raise _ERRORS.get(rc, Error)(rc, text)


def invalid(message):
    """The package's own refusal of an argument, before the library sees it."""
    return InvalidArgument(1, message)
