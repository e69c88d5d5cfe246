"""What the library is given for a Python buffer: its address, element
count and datatype, checked against the storage, and the reference that
keeps the memory alive for as long as the library may touch it."""

import ctypes
import sys

from ._library import invalid

# nnpccl_datatype_t, by name
DATATYPES = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5, "float16": 6,
             "bfloat16": 7, "float32": 8, "float64": 9}
SIZES = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 2, 8: 4, 9: 8}
_NAMES = {code: name for name, code in DATATYPES.items()}
_FLOAT_FORMATS = {("e", 2): 6, ("f", 4): 8, ("d", 8): 9}
_INT_FORMATS = {1: (0, 1), 4: (2, 3), 8: (4, 5)}  # signed, unsigned by size
# Storage of raw bytes may carry any datatype (bytes received from a file
# or a socket); 16-bit integers may carry float16 and bfloat16 bits, the
# way numpy code keeps bfloat16, for which it has no type.
_RAW_BYTE_FORMATS = "Bbc"
_HALF_CARRIER_FORMATS = "hH"
_HALF_FLOATS = (DATATYPES["float16"], DATATYPES["bfloat16"])
_FOREIGN_BYTE_ORDER = ">!" if sys.byteorder == "little" else "<"


def _format(view):
    return view.format.lstrip("@=<>!")


def _natural_datatype(view):
    """The datatype a buffer's own format means, or None."""
    fmt = _format(view)
    if (fmt, view.itemsize) in _FLOAT_FORMATS:
        return _FLOAT_FORMATS[(fmt, view.itemsize)]
    if len(fmt) == 1 and fmt in "bhilq" and view.itemsize in _INT_FORMATS:
        return _INT_FORMATS[view.itemsize][0]
    if len(fmt) == 1 and fmt in "BHILQ" and view.itemsize in _INT_FORMATS:
        return _INT_FORMATS[view.itemsize][1]
    return None


def _override_fits(view, datatype):
    fmt = _format(view)
    if _natural_datatype(view) == datatype:
        return True
    if view.itemsize == 1 and fmt in _RAW_BYTE_FORMATS and len(fmt) == 1:
        return True
    return view.itemsize == 2 and len(fmt) == 1 and fmt in _HALF_CARRIER_FORMATS and datatype in _HALF_FLOATS


def _describe(view):
    return f"{view.itemsize}-byte elements of format {view.format!r}"


def datatype_of(view, dtype, name):
    """The datatype of a buffer: its own, or `dtype` where the storage can carry it."""
    if view.itemsize > 1 and view.format[:1] in _FOREIGN_BYTE_ORDER:
        raise invalid(f"{name} has {_describe(view)}, not in this machine's byte order ({sys.byteorder}-endian)")
    if dtype is None:
        natural = _natural_datatype(view)
        if natural is None:
            raise invalid(f"{name} has {_describe(view)}, which nnpccl has no datatype for; pass dtype= (one of "
                          f"{', '.join(DATATYPES)}) if it carries one")
        return natural
    if not isinstance(dtype, str) or dtype not in DATATYPES:
        raise invalid(f"dtype={dtype!r} is not one of {', '.join(DATATYPES)}")
    datatype = DATATYPES[dtype]
    if not _override_fits(view, datatype):
        natural = _natural_datatype(view)
        own = f" (its own datatype is {_NAMES[natural]})" if natural is not None else ""
        raise invalid(f"dtype={dtype!r} does not fit {name}, which has {_describe(view)}{own}: dtype= must name the "
                      "storage's own datatype, or float16/bfloat16 on 16-bit integers, or any datatype on bytes")
    return datatype


class Buffer:
    """One buffer of a call; `keep` holds its memory until the call is over."""

    def __init__(self, obj, dtype, writable, name):
        try:
            view = memoryview(obj)
        except TypeError:
            raise invalid(f"{name} ({type(obj).__name__}) does not have the buffer protocol") from None
        if not view.c_contiguous:
            raise invalid(f"{name} is not C-contiguous")
        if writable and view.readonly:
            raise invalid(f"{name} is read-only, and the call writes it")
        self.datatype = datatype_of(view, dtype, name)
        self.name = name
        self.nbytes = view.nbytes
        size = SIZES[self.datatype]
        if self.nbytes % size:
            raise invalid(f"{name} holds {self.nbytes} bytes, not a whole number of {size}-byte "
                          f"{_NAMES[self.datatype]} elements")
        self.count = self.nbytes // size
        # The view holds the object's buffer export: while it lives, numpy,
        # bytearray and array.array refuse to resize or free the memory.
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

    def expect(self, count, why):
        """Refuses the buffer unless it holds `count` elements."""
        if self.count != count:
            raise invalid(f"{self.name} holds {self.count} elements; {why} it must hold {count}")


def same_datatype(send, recv):
    if send is not None and recv is not None and send.datatype != recv.datatype:
        raise invalid(f"sendbuf and recvbuf hold different datatypes ({_NAMES[send.datatype]} and "
                      f"{_NAMES[recv.datatype]})")
