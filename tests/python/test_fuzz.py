"""Every method of the package called with random shapes, storages,
dtype= overrides, roots, ops, in place and out of place, blocking,
nonblocking (waited, polled or dropped), with or without a defect, on 2
ranks: a call with a defect must raise InvalidArgument on the ranks that
have it (the others, knowing from the shared seed, skip it), and a call
without one must give the exact result. A rank killed by a signal fails
the test by name. Seeded: the same calls every run."""

import collections
import time

import numpy as np

import nnpccl
from ranks import run_ranks

SEED = 41
CALLS = 2000
METHODS = ("allreduce", "reduce_scatter", "allgather", "broadcast", "reduce", "gather", "scatter", "alltoall",
           "barrier", "sendrecv")
# Storage kinds: numpy type (None: bytearray) and the dtype= they need.
KINDS = {
    "float32": (np.float32, None), "float64": (np.float64, None), "float16": (np.float16, None),
    "int8": (np.int8, None), "uint8": (np.uint8, None), "int32": (np.int32, None), "uint32": (np.uint32, None),
    "int64": (np.int64, None), "uint64": (np.uint64, None), "bfloat16@uint16": (np.uint16, "bfloat16"),
    "float16@int16": (np.int16, "float16"), "float32@bytes": (None, "float32"),
}
FLOAT_KINDS = {"float32", "float64", "float16", "bfloat16@uint16", "float16@int16", "float32@bytes"}
REDUCTIONS = ("allreduce", "reduce_scatter", "reduce")
ROOTED = ("broadcast", "reduce", "gather", "scatter")
# Defects only the root's buffers can have; the others are every rank's
# (but a receive's, the receiver's).
ROOT_DEFECTS = ("root_size", "root_none")


def encode(kind, values):
    if kind == "bfloat16@uint16":
        return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    if kind == "float16@int16":
        return values.astype(np.float16).view(np.int16)
    if kind == "float32@bytes":
        return bytearray(values.astype(np.float32).tobytes())
    return values.astype(KINDS[kind][0])


def decode(kind, buf):
    if kind == "float32@bytes":
        return np.frombuffer(bytes(buf), np.float32).astype(np.float64)
    arr = np.asarray(buf).ravel()
    if kind == "bfloat16@uint16":
        return (arr.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if kind == "float16@int16":
        return arr.view(np.float16).astype(np.float64)
    return arr.astype(np.float64)


def reduce_values(op, inputs):
    stacked = np.stack(inputs)
    return {"sum": stacked.sum(0), "prod": stacked.prod(0), "min": stacked.min(0), "max": stacked.max(0),
            "avg": stacked.sum(0) / len(inputs)}[op]


def applicable_defects(method, inplace, kind):
    """The defects that can be given to this call."""
    has_recv = method in ("allreduce", "reduce_scatter", "allgather", "alltoall", "reduce") and not inplace
    defects = ["dtype_name"] if method not in ("barrier",) else []
    if method != "barrier" and kind not in ("float32@bytes", "int8", "uint8"):  # bytes carry any datatype
        defects.append("dtype_misfit")
    if method in REDUCTIONS:
        defects.append("op")
    if has_recv:
        defects += ["recv_readonly", "recv_noncontiguous", "recv_datatype"]
        if method != "reduce":
            defects.append("recv_size")
    if method == "broadcast":
        defects.append("recv_readonly")
    if method in ROOTED:
        defects.append("root")
    if method == "sendrecv":
        defects += ["peer_self", "recv_readonly"]
    if method in ("alltoall", "reduce_scatter") and not inplace:
        defects.append("send_blocks")
    if method in ("reduce", "gather", "scatter") and not (method == "reduce" and inplace):
        defects.append("root_size")
    if method in ("gather", "scatter"):
        defects.append("root_none")
    return defects


def plan(i, n):
    """The call of step i, the same on every rank."""
    rng = np.random.default_rng([SEED, i])
    method = METHODS[rng.integers(len(METHODS))]
    kind = list(KINDS)[rng.integers(len(KINDS))]
    ops = ("sum", "prod", "min", "max", "avg") if kind in FLOAT_KINDS else ("sum", "prod", "min", "max")
    inplace = method in ("allreduce", "reduce", "allgather", "reduce_scatter") and rng.random() < 0.3
    defects = applicable_defects(method, inplace, kind)
    return {
        "method": method, "kind": kind, "count": int(rng.integers(0, 13)), "op": ops[rng.integers(len(ops))],
        "root": int(rng.integers(n)), "src": int(rng.integers(n)), "inplace": inplace,
        "mode": ("blocking", "wait", "test", "drop")[rng.integers(4)],
        "shape2d": bool(rng.random() < 0.3),
        "defect": defects[rng.integers(len(defects))] if defects and rng.random() < 0.35 else None,
    }


def inputs(i, n, length, op):
    """Every rank's input values for step i: small integers, so that every
    datatype holds sums, products and averages of two exactly."""
    low, high = {"prod": (1, 4), "min": (0, 60), "max": (0, 60)}.get(op, (0, 8))
    return [np.random.default_rng([SEED, i, r]).integers(low, high, length).astype(np.float64) for r in range(n)]


def shaped(buf, p):
    if isinstance(buf, np.ndarray) and p["shape2d"] and buf.size and buf.size % 2 == 0:
        return buf.reshape(2, buf.size // 2)
    return buf


def output(p, length, defect):
    """The recv buffer of a call, given its defect."""
    kind = p["kind"]
    if defect == "recv_size":
        length += 1
    if defect == "recv_datatype":
        return np.zeros(length, np.float64 if kind != "float64" else np.float32)
    if defect == "recv_noncontiguous":
        whole = encode(kind, np.zeros(2 * length + 4))  # two elements at least: one alone is contiguous
        return memoryview(whole)[::2] if kind == "float32@bytes" else whole[::2]
    buf = shaped(encode(kind, np.zeros(length)), p)
    if defect == "recv_readonly":
        if isinstance(buf, bytearray):
            return bytes(buf)
        buf.flags.writeable = False
    return buf


def call_args(p, defect):
    """The op, dtype= and root of a call, given its defect."""
    dtype = KINDS[p["kind"]][1]
    if defect == "dtype_name":
        dtype = "complex64"
    elif defect == "dtype_misfit":
        dtype = "int32" if p["kind"] in ("float16@int16", "bfloat16@uint16") else (
            "float16" if p["kind"] != "float16" else "float64")
    op = "xor" if defect == "op" else p["op"]
    return op, dtype


def holders(p, n):
    """The ranks that have the call's defect; the others skip the call."""
    if p["defect"] in ROOT_DEFECTS:
        return {p["root"]}
    if p["method"] == "sendrecv" and p["defect"] == "recv_readonly":
        return {1 - p["src"]}
    return set(range(n))


def step(comm, i, p):
    """Runs step i; returns (raised, output, expected) with output None when
    the call has none on this rank."""
    defect = p["defect"]
    if defect is not None and comm.rank not in holders(p, comm.size):
        return "skipped", None, None
    run, out, expected = make_call(comm, i, p, defect)
    try:
        req = run()
    except nnpccl.InvalidArgument as e:
        return ("invalid", str(e)), None, None
    if p["mode"] == "wait":
        req.wait()
    elif p["mode"] == "test":
        deadline = time.monotonic() + 20
        while not req.test():
            assert time.monotonic() < deadline, f"step {i}: {p}: test() never became true"
    elif p["mode"] == "drop":
        del req
        comm.barrier()  # done only once the dropped call is
    return "ran", (out if expected is not None else None), expected


def make_call(comm, i, p, mine):
    """The call of step i on this rank, given its defect `mine`: (run, its
    output buffer, the output's expected values)."""
    r, n, c, kind, method, root = comm.rank, comm.size, p["count"], p["kind"], p["method"], p["root"]
    op, dtype = call_args(p, mine)
    call_root = n if mine == "root" else root
    blocks = {"reduce_scatter": n * c, "scatter": n * c, "alltoall": n * c}.get(method, c)
    if mine == "send_blocks":
        blocks += 1
    values = inputs(i, n, n * c if method in ("reduce_scatter", "scatter", "alltoall") else c, p["op"])
    send = shaped(encode(kind, np.concatenate([values[r], [1.0]]) if mine == "send_blocks" else values[r]), p)
    expected, out, run = None, None, None
    nb = {"nonblocking": p["mode"] != "blocking"}
    if method == "allreduce":
        out = send if p["inplace"] else output(p, c, mine)
        expected = reduce_values(p["op"], values)
        run = lambda: comm.allreduce(send, None if p["inplace"] else out, op=op, dtype=dtype, **nb)
    elif method == "reduce_scatter":
        if p["inplace"]:  # recvbuf == sendbuf + rank x recvcount elements
            out = np.asarray(send).reshape(-1)[r * c:(r + 1) * c] if isinstance(send, np.ndarray) else \
                memoryview(send)[r * c * 4:(r + 1) * c * 4]
        else:
            out = output(p, c, mine)
        expected = reduce_values(p["op"], values)[r * c:(r + 1) * c]
        run = lambda: comm.reduce_scatter(send, out, op=op, dtype=dtype, **nb)
    elif method == "allgather":
        expected = np.concatenate(values)
        if p["inplace"]:  # sendbuf == recvbuf + rank x sendcount elements
            out = encode(kind, expected * 0)
            whole = memoryview(out) if kind == "float32@bytes" else out
            size = 4 if kind == "float32@bytes" else 1
            whole[r * c * size:(r + 1) * c * size] = memoryview(encode(kind, values[r])).cast("B").cast(
                whole.format) if kind == "float32@bytes" else encode(kind, values[r])
            send = whole[r * c * size:(r + 1) * c * size]
        else:
            out = output(p, n * c, mine)
        run = lambda: comm.allgather(send, out, dtype=dtype, **nb)
    elif method == "alltoall":
        out = output(p, n * c, mine)
        expected = np.concatenate([values[j][r * c:(r + 1) * c] for j in range(n)])
        run = lambda: comm.alltoall(send, out, dtype=dtype, **nb)
    elif method == "broadcast":
        out = send
        if mine == "recv_readonly":
            out = output(p, c, "recv_readonly")
        expected = values[root]
        run = lambda: comm.broadcast(out, root=call_root, dtype=dtype, **nb)
    elif method == "reduce":
        if p["inplace"]:
            out = send
        else:
            out = output(p, c + (1 if mine == "root_size" else 0), mine if mine != "root_size" else None)
        if r != root and not p["inplace"] and not mine:
            out = output(p, (i % 3) * 5, None)  # unused off the root: any size
        expected = reduce_values(p["op"], values) if r == root else None
        run = lambda: comm.reduce(send, None if p["inplace"] else out, op=op, root=call_root, dtype=dtype, **nb)
    elif method == "gather":
        if r == root:
            out = None if mine == "root_none" else output(p, n * c + (1 if mine == "root_size" else 0), None)
        else:
            out = None if i % 2 else output(p, i % 7, None)  # unused off the root
        expected = np.concatenate(values) if r == root else None
        run = lambda: comm.gather(send, out, root=call_root, dtype=dtype, **nb)
    elif method == "scatter":
        out = output(p, c, None)
        if r == root:
            full = shaped(encode(kind, values[root]), p)
            send = None if mine == "root_none" else (
                encode(kind, np.concatenate([values[root], [1.0]])) if mine == "root_size" else full)
        else:
            send = None if i % 2 else encode(kind, np.zeros(i % 5))  # unused off the root
        expected = values[root][r * c:(r + 1) * c]
        run = lambda: comm.scatter(send, out, root=call_root, dtype=dtype, **nb)
    elif method == "barrier":
        run = lambda: comm.barrier(**nb)
    else:  # sendrecv: rank src sends to the other
        src = p["src"]
        peer = r if mine == "peer_self" else 1 - r
        if r == src:
            run = lambda: comm.send(send, peer, dtype=dtype, **nb)
        else:
            out = output(p, c, mine if mine == "recv_readonly" else None)
            expected = values[src]
            run = lambda: comm.recv(out, peer, dtype=dtype, **nb)
    return run, out, expected


def fuzz(comm):
    seen = collections.Counter()
    for i in range(CALLS):
        p = plan(i, comm.size)
        raised, out, expected = step(comm, i, p)
        if p["defect"] is not None and raised != "skipped":
            assert raised != "ran", f"step {i}: {p}: a call with defect {p['defect']} ran"
            seen[(p["method"], "refused")] += 1
        elif raised == "ran":
            if expected is not None:
                got = decode(p["kind"], out)
                assert got.tolist() == expected.tolist(), f"step {i}: {p}: got {got}, expected {expected}"
            seen[(p["method"], "ran")] += 1
        elif raised != "skipped":
            raise AssertionError(f"step {i}: {p}: a call without a defect was refused: {raised[1]}")
    return dict(seen)


def test_random_calls_raise_or_give_exact_results():
    started = time.monotonic()
    seen = run_ranks(2, fuzz, timeout=240, comm_timeout=30)
    for method in METHODS:
        assert seen[0].get((method, "ran"), 0) + seen[1].get((method, "ran"), 0) > 0, f"{method} never ran"
        if method != "barrier":
            assert any(s.get((method, "refused"), 0) for s in seen), f"{method} was never refused"
    print(f"{CALLS} calls on 2 ranks in {time.monotonic() - started:.1f} s: {seen[0]}")
