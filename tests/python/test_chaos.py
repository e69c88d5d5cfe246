"""Chaos: jobs of 4-8 ranks run a seeded random mix of collectives and
point-to-point calls (every datatype and op, 0 bytes to 4 MiB, blocking and
nonblocking, in place and out), and at a random moment one random rank is
killed (SIGKILL) or stopped (SIGSTOP), over shared memory and over libfabric.
Every trial must end with every survivor's call failing with an nnpccl error
that names the lost rank, in time (a killed rank within 5 s; a stopped one
in a timeout within NNPCCL_TIMEOUT plus a margin), no process left, no file
descriptor left open in a survivor once its communicator is gone, and no
file left in /tmp; and fresh jobs on the same host still work, between the
trials and after them.

    NNPCCL_CHAOS_SEED=N      the master seed (printed by every run)
    NNPCCL_CHAOS_TRIALS=N    trials (default 20: the seed changes every run, so CI
                             covers new trials each time; a longer hunt sets more)
    NNPCCL_CHAOS_TRIAL=K     run only trial K of the seed's sequence (to reproduce it)
    NNPCCL_CHAOS_JOBS=N      trials run side by side (default 2)

A trial's job, victim, moment and call sequence follow from the master seed
and the trial's number. The moment is either a delay after every rank's
init (the job runs its sequence without end), or a few milliseconds after
the victim reaches one of its last steps or its teardown (the sequence is
short, and the others may be finishing or destroying their communicators
as it fails); where exactly in a call it lands varies from run to run.

Each trial starts one job process, which imports the package and forks the
ranks: starting Python and numpy for each rank would take longer than most
trials' failure handling. The ranks meet either the torchrun way (rank 0's
process hosts the rendezvous root) or through a unique id from the job
process (a root that is no rank's), so both ways a dead rank is reported
are exercised.
"""

import concurrent.futures
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import traceback

KILL_BOUND_S = 5.0
# NNPCCL_TIMEOUT of the stop trials. It bounds init and every wait before
# the stop too, so it must outlast what a loaded 2-core machine does to an
# 8-rank job beside another: a rank's init, or a rank left unscheduled for
# seconds (3 s was seen to run out there, in init and mid-sequence alike).
STOP_TIMEOUT_S = 10
# The error's delay past NNPCCL_TIMEOUT: the wait that notices it, then
# the failure's way from rank to rank to every survivor, each a wake-up
# that a loaded machine delays (5 s was seen to run out there).
STOP_MARGIN_S = 10.0
# Kill trials run with a long NNPCCL_TIMEOUT, so that a death the library
# fails to notice shows as a hang, not as a timeout passing for detection.
KILL_TIMEOUT_S = 60
# After the error is due: a survivor's teardown, descriptor count and exit.
TEARDOWN_S = 10.0
INIT_DEADLINE_S = 40.0
JOB_END_S = 30.0
# A descriptor may outlive the communicator briefly where a detached thread
# (the rendezvous root hosted by rank 0) closes it once the peers are gone.
FD_SETTLE_S = 3.0
MAX_BYTES = 4 << 20
MARKER = "NNPCCL_CHAOS_TRIAL"

DTYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "bfloat16", "float32", "float64"]
OPS = ["sum", "prod", "min", "max", "avg"]
KINDS = [("allreduce", 5), ("broadcast", 2), ("reduce", 2), ("allgather", 2), ("reduce_scatter", 2),
         ("alltoall", 2), ("gather", 1), ("scatter", 1), ("barrier", 1), ("sendrecv", 2), ("ring", 1)]


# --- the ranks -------------------------------------------------------------

def _storage(dtype):
    import numpy as np
    return np.uint16 if dtype == "bfloat16" else np.dtype(dtype).type


def _to_storage(values, dtype):
    """Exact small integers (int64) or float values as `dtype`'s storage."""
    import numpy as np
    if dtype == "bfloat16":
        u = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
        return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)  # nearest even, as the library rounds
    return np.asarray(values).astype(_storage(dtype))


def _values(kind, op, rank, step, idx):
    """Element idx of `rank`'s send buffer in step `step`: small integers,
    so that every reduction order gives the same, exactly known bits."""
    if kind in ("allreduce", "reduce", "reduce_scatter"):
        if op == "prod":
            return 1 + (idx + step + rank) % 2
        return (idx * 7 + step * 13 + rank * 31) % 4
    return (idx * 7 + step * 13 + rank * 31) % 101


def _reduced(op, dtype, stacked, nranks):
    """The reduction over axis 0 of int64 values, as `dtype`'s storage."""
    import numpy as np
    if op == "sum":
        return _to_storage(stacked.sum(axis=0), dtype)
    if op == "prod":
        return _to_storage(stacked.prod(axis=0), dtype)  # int8/uint8 wrap alike
    if op == "min":
        return _to_storage(stacked.min(axis=0), dtype)
    if op == "max":
        return _to_storage(stacked.max(axis=0), dtype)
    total = stacked.sum(axis=0)
    if dtype == "float64":
        return total.astype(np.float64) / nranks
    if dtype in ("float16", "bfloat16", "float32"):  # combined in float32
        return _to_storage(total.astype(np.float32) / np.float32(nranks), dtype)
    return _to_storage(total // nranks, dtype)


def draw_step(rng, nranks):
    """One step of the sequence; every rank draws the same."""
    kind = rng.choices([k for k, _ in KINDS], [w for _, w in KINDS])[0]
    dtype = rng.choice(DTYPES)
    op = rng.choice(OPS)
    elem = {"int8": 1, "uint8": 1, "float16": 2, "bfloat16": 2, "int32": 4, "uint32": 4, "float32": 4}.get(dtype, 8)
    nbytes = 0 if rng.random() < 0.03 else int(2 ** rng.uniform(0, math.log2(MAX_BYTES)))
    per_rank_blocks = kind in ("allgather", "reduce_scatter", "alltoall", "gather", "scatter")
    count = nbytes // (elem * (nranks if per_rank_blocks else 1))
    if nbytes and not count:
        count = 1
    a = rng.randrange(nranks)
    b = (a + 1 + rng.randrange(nranks - 1)) % nranks
    return {"kind": kind, "dtype": dtype, "op": op, "count": count, "root": a, "peer": b,
            "in_place": rng.random() < 0.4, "nonblocking": kind == "ring" or rng.random() < 0.5,
            "recv_first": rng.random() < 0.5,
            # After the step: wait for every pending request.
            "drain": rng.random() < 0.35}


def issue(comm, step, s, rank, nranks):
    """Issues step `s` on this rank; returns [(request or None, check)]:
    `check()` gives a message when the output is wrong."""
    import numpy as np
    kind, dtype, op, n, root = s["kind"], s["dtype"], s["op"], s["count"], s["root"]
    st = _storage(dtype)
    dt = "bfloat16" if dtype == "bfloat16" else None
    nb = s["nonblocking"]

    def mine(total, who=rank):
        return _to_storage(_values(kind, op, who, step, np.arange(total, dtype=np.int64)), dtype)

    def sample(total):
        if total <= 256:
            return np.arange(total, dtype=np.int64)
        return np.unique(np.linspace(0, total - 1, 256).astype(np.int64))

    def expect(out, idx, want, what):
        def check():
            got = np.asarray(out).reshape(-1)[idx] if len(idx) else np.zeros(0, st)
            if not np.array_equal(got.view(np.uint8), np.asarray(want, st).view(np.uint8)):
                bad = int(np.nonzero(got != want)[0][0]) if got.shape == np.shape(want) else 0
                return (f"step {step} {kind} {dtype} {op} x{n}: {what} element {int(idx[bad])} is "
                        f"{got[bad]!r}, expected {np.asarray(want)[bad]!r}")
            return None
        return check

    def reduced_at(idx):
        stacked = np.stack([_values(kind, op, r, step, idx) for r in range(nranks)])
        return _reduced(op, dtype, stacked, nranks)

    if kind == "allreduce":
        send = mine(n)
        recv = None if s["in_place"] else np.full(n, 0x55, st)
        req = comm.allreduce(send, recv, op=op, dtype=dt, nonblocking=nb)
        idx = sample(n)
        return [(req if nb else None, expect(send if recv is None else recv, idx, reduced_at(idx), "allreduce"))]
    if kind == "broadcast":
        buf = mine(n) if rank == root else np.full(n, 0x55, st)
        req = comm.broadcast(buf, root=root, dtype=dt, nonblocking=nb)
        idx = sample(n)
        return [(req if nb else None,
                 expect(buf, idx, _to_storage(_values(kind, op, root, step, idx), dtype), "broadcast"))]
    if kind == "reduce":
        send = mine(n)
        recv = None if s["in_place"] else np.full(n, 0x55, st)
        req = comm.reduce(send, recv, op=op, root=root, dtype=dt, nonblocking=nb)
        if rank != root:
            return [(req if nb else None, lambda: None)]
        idx = sample(n)
        return [(req if nb else None, expect(send if recv is None else recv, idx, reduced_at(idx), "reduce"))]
    if kind in ("allgather", "gather"):
        if kind == "gather" and rank != root:
            req = comm.gather(mine(n), None, root=root, dtype=dt, nonblocking=nb)
            return [(req if nb else None, lambda: None)]
        recv = np.full(n * nranks, 0x55, st)
        if s["in_place"]:
            recv[rank * n:(rank + 1) * n] = mine(n)
            send = recv[rank * n:(rank + 1) * n]
        else:
            send = mine(n)
        if kind == "gather":
            req = comm.gather(send, recv, root=root, dtype=dt, nonblocking=nb)
        else:
            req = comm.allgather(send, recv, dtype=dt, nonblocking=nb)
        idx = sample(n * nranks)
        want = _to_storage(np.array([_values(kind, op, int(i) // n, step, int(i) % n) for i in idx],
                                    np.int64), dtype) if n else np.zeros(0, st)
        return [(req if nb else None, expect(recv, idx, want, kind))]
    if kind == "reduce_scatter":
        send = mine(n * nranks)
        recv = send[rank * n:(rank + 1) * n] if s["in_place"] else np.full(n, 0x55, st)
        req = comm.reduce_scatter(send, recv, op=op, dtype=dt, nonblocking=nb)
        idx = sample(n)
        return [(req if nb else None, expect(recv, idx, reduced_at(rank * n + idx), "reduce_scatter"))]
    if kind == "alltoall":
        send = mine(n * nranks)
        recv = send if s["in_place"] else np.full(n * nranks, 0x55, st)
        req = comm.alltoall(send, recv, dtype=dt, nonblocking=nb)
        idx = sample(n * nranks)
        want = _to_storage(np.array([_values(kind, op, int(i) // n, step, rank * n + int(i) % n) for i in idx],
                                    np.int64), dtype) if n else np.zeros(0, st)
        return [(req if nb else None, expect(recv, idx, want, "alltoall"))]
    if kind == "scatter":
        recv = np.full(n, 0x55, st)
        send = mine(n * nranks) if rank == root else None
        req = comm.scatter(send, recv, root=root, dtype=dt, nonblocking=nb)
        idx = sample(n)
        want = _to_storage(_values(kind, op, root, step, rank * n + idx), dtype)
        return [(req if nb else None, expect(recv, idx, want, "scatter"))]
    if kind == "barrier":
        req = comm.barrier(nonblocking=nb)
        return [(req if nb else None, lambda: None)]
    if kind == "sendrecv":
        a, b = root, s["peer"]
        if rank == a:
            req = comm.send(mine(n), b, dtype=dt, nonblocking=nb)
            return [(req if nb else None, lambda: None)]
        if rank == b:
            buf = np.full(n, 0x55, st)
            req = comm.recv(buf, a, dtype=dt, nonblocking=nb)
            idx = sample(n)
            return [(req if nb else None,
                     expect(buf, idx, _to_storage(_values(kind, op, a, step, idx), dtype), "recv"))]
        return []
    if kind == "ring":  # always nonblocking: every rank sends before it receives
        left, right = (rank - 1) % nranks, (rank + 1) % nranks
        buf = np.full(n, 0x55, st)
        idx = sample(n)
        check = expect(buf, idx, _to_storage(_values(kind, op, left, step, idx), dtype), "ring recv")
        if s["recv_first"]:
            r = comm.irecv(buf, left, dtype=dt)
            return [(r, check), (comm.isend(mine(n), right, dtype=dt), lambda: None)]
        w = comm.isend(mine(n), right, dtype=dt)
        return [(w, lambda: None), (comm.irecv(buf, left, dtype=dt), check)]
    raise AssertionError(kind)


def fd_table():
    """This process's descriptors and what they are (the listing's own
    descriptor left out)."""
    own = f"/proc/{os.getpid()}/fd"
    table = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target != own and not target.endswith(f"/{os.getpid()}/fd"):
            table[int(name)] = target
    return table


def run_rank(spec, rank, uid):
    """One rank: init, the sequence until it fails (or ends, in a healthy
    job), teardown; returns its report."""
    import nnpccl
    report = {"rank": rank, "pid": os.getpid(), "steps": 0, "corrupt": [], "root_waited": False}
    before = fd_table()
    if uid is None:
        comm = nnpccl.Communicator.from_env()
    else:
        comm = nnpccl.Communicator(spec["nranks"], uid, rank)
    ready = os.path.join(spec["dir"], f"ready{rank}")
    with open(ready + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(ready + ".tmp", ready)
    nranks = spec["nranks"]
    rng = random.Random(spec["seed"])
    pending = []
    errors = []  # every nnpccl error this rank saw: (time, class, code, message)
    other = None

    def note(e):
        errors.append((time.time(), type(e).__name__, getattr(e, "code", None), str(e)))

    def mark(step):
        # The victim tells the driver it has come to the step where the
        # failure is due (spec["steps"]: its teardown).
        if rank == spec.get("victim") and step == spec.get("mark_at"):
            with open(os.path.join(spec["dir"], "mark.tmp"), "w") as f:
                f.write(str(step))
            os.rename(os.path.join(spec["dir"], "mark.tmp"), os.path.join(spec["dir"], "mark"))

    def wait_all():
        while pending:
            req, check = pending.pop(0)
            req.wait()
            bad = check()
            if bad:
                report["corrupt"].append(bad)

    step = 0
    try:
        while spec["steps"] is None or step < spec["steps"]:
            s = draw_step(rng, nranks)
            mark(step)
            for req, check in issue(comm, step, s, rank, nranks):
                if req is None:
                    bad = check()
                    if bad:
                        report["corrupt"].append(bad)
                else:
                    pending.append((req, check))
            step += 1
            report["steps"] = step
            if s["drain"] or len(pending) >= 6:
                wait_all()
        wait_all()
        mark(step)
    except nnpccl.Error as e:
        note(e)
        # The requests still pending must fail too (or have finished
        # before the failure), each at once.
        while pending:
            req, check = pending.pop(0)
            try:
                req.wait()
                bad = check()
                if bad:
                    report["corrupt"].append(bad)
            except nnpccl.Error as e2:
                note(e2)
            except Exception:  # noqa: BLE001 - reported as a wrong error
                other = traceback.format_exc()
        # And a failed communicator refuses further calls at once.
        try:
            comm.barrier()
            other = other or "a call after the failure succeeded"
        except nnpccl.Error as e3:
            note(e3)
    except Exception:  # noqa: BLE001 - reported as a wrong error
        other = traceback.format_exc()
    # A failed communicator ends either way: abort, or destroy (which
    # returns the failure); a healthy one is destroyed, and that may fail
    # too when a peer fails meanwhile.
    report["teardown"] = "abort" if errors and rank % 2 == spec["seed"] % 2 else "destroy"
    try:
        comm.abort() if report["teardown"] == "abort" else comm.destroy()
    except nnpccl.Error as e:
        note(e)
    except Exception:  # noqa: BLE001 - reported as a wrong error
        other = other or traceback.format_exc()
    report["errors"] = errors
    report["other"] = other
    after = settled_fd_table(before)
    if rank == 0 and spec["meet"] == "env" and spec.get("victim") is not None and _only_root_sockets(before, after):
        # Rank 0's process hosts the job's rendezvous root, which serves
        # until every rank has left or died; a stopped rank has done
        # neither, so its sockets stay open (in this process, not in its
        # communicator) until the driver has killed the stopped rank.
        report["root_waited"] = True
        with open(os.path.join(spec["dir"], "root-waits"), "w") as f:
            f.write(json.dumps({str(fd): _socket_name(t) for fd, t in after.items() if before.get(fd) != t}))
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(spec["dir"], "victim-gone")) and time.monotonic() < deadline:
            time.sleep(0.02)
        after = settled_fd_table(before)
    report["fds_before"] = len(before)
    report["fds_after"] = len(after)
    report["fds_left"] = {str(fd): _socket_name(t) for fd, t in after.items() if before.get(fd) != t}
    return report


def settled_fd_table(before):
    """The descriptors once they number no more than `before`, or after FD_SETTLE_S."""
    started = time.monotonic()
    while True:
        after = fd_table()
        if len(after) <= len(before) or time.monotonic() - started > FD_SETTLE_S:
            return after
        time.sleep(0.02)


_TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
               "0A": "LISTEN"}


def _socket_info(target):
    """(local port, remote port, TCP state) of a TCP socket, or None."""
    found = re.fullmatch(r"socket:\[(\d+)\]", target)
    for table in ("tcp", "tcp6") if found else ():
        try:
            with open(f"/proc/net/{table}") as f:
                for row in f.read().splitlines()[1:]:
                    cells = row.split()
                    if len(cells) > 9 and cells[9] == found.group(1):
                        local, remote = (int(a.split(":")[1], 16) for a in cells[1:3])
                        return local, remote, _TCP_STATES.get(cells[3], cells[3])
        except OSError:
            pass
    return None


def _only_root_sockets(before, after):
    """Whether what `after` has more than `before` is one listening socket
    and connections accepted on its port: a rendezvous root's."""
    extra = [_socket_info(t) for fd, t in after.items() if before.get(fd) != t]
    listening = {info[0] for info in extra if info and info[2] == "LISTEN"}
    return len(listening) == 1 and all(info and info[0] in listening for info in extra)


def _socket_name(target):
    """A descriptor's target, with a TCP socket's ports and state, for a leak's report."""
    info = _socket_info(target)
    return f"{target} tcp :{info[0]} -> :{info[1]} {info[2]}" if info else target


def job_main(spec_path):
    """The job process: forks the ranks, hands them the unique id (or lets
    them meet the torchrun way), reaps them and writes how each ended."""
    with open(spec_path) as f:
        spec = json.load(f)
    import numpy  # noqa: F401 - loaded once, before the fork
    import nnpccl
    nranks = spec["nranks"]
    pipes = [os.pipe() for _ in range(nranks)] if spec["meet"] == "uid" else []
    children = {}
    for rank in range(nranks):
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                uid = None
                if pipes:
                    for r, (rfd, wfd) in enumerate(pipes):
                        os.close(wfd)
                        if r != rank:
                            os.close(rfd)
                    with os.fdopen(pipes[rank][0], "rb") as f:
                        uid = f.read()
                else:
                    os.environ.update(RANK=str(rank), WORLD_SIZE=str(nranks), LOCAL_WORLD_SIZE=str(nranks),
                                      TORCHELASTIC_RUN_ID=spec["job"])
                    os.environ.pop("MASTER_ADDR", None)
                report = run_rank(spec, rank, uid)
                with open(os.path.join(spec["dir"], f"rank{rank}.json"), "w") as f:
                    json.dump(report, f)
                code = 0
            except BaseException:  # noqa: BLE001 - the rank's report says why
                with open(os.path.join(spec["dir"], f"crash{rank}"), "w") as f:
                    f.write(traceback.format_exc())
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                # exit(3), not os._exit: the library's static destructors
                # run as at any process's end, while its threads may still run.
                import ctypes
                ctypes.CDLL(None).exit(code)
        children[pid] = rank
    if pipes:
        uid = nnpccl.get_unique_id()  # this process hosts the root: no rank's
        for rfd, wfd in pipes:
            os.close(rfd)
            os.write(wfd, uid)
            os.close(wfd)
    ended = {}
    while children:
        pid, status = os.waitpid(-1, 0)
        ended[children.pop(pid)] = status
    with open(os.path.join(spec["dir"], "ended.json"), "w") as f:
        json.dump({str(r): s for r, s in ended.items()}, f)
    return 0


# --- the driver ------------------------------------------------------------

def _alive(pid):
    """Whether pid runs (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _processes_of(trial_id):
    """Every process started for a trial, wherever it was reparented."""
    needle = f"{MARKER}={trial_id}\0".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle in f.read():
                    found.append(int(name))
        except OSError:
            pass
    return found


def _describe(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{pid}/wchan") as f:
            wchan = f.read()
        return f"pid {pid} state {state} in {wchan or '?'}"
    except OSError:
        return f"pid {pid} (gone)"


def _stop_all(pids):
    for pid in pids:
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except OSError:
                pass


def trial_plan(seed, index):
    rng = random.Random(f"{seed}/{index}")
    nranks = rng.randint(4, 8)
    plan = {
        "index": index,
        "failure": ("kill", "stop")[index % 2],
        "transport": ("shm", "ofi")[(index // 2) % 2],
        "nranks": nranks,
        "victim": rng.randrange(nranks),
        "meet": rng.choice(["env", "uid"]),
        "seed": rng.getrandbits(48),
        # While the job runs (a delay after init), or as it ends: the
        # victim's last steps or its destroy, while the others finish theirs.
        "moment": "end" if rng.random() < 0.25 else "run",
        "steps": None,
        "mark_at": None,
    }
    if plan["moment"] == "run":
        plan["delay"] = rng.choice([rng.uniform(0, 0.05), rng.uniform(0, 1.5)])
    else:
        plan["steps"] = rng.randint(3, 40)
        plan["mark_at"] = plan["steps"] - rng.randrange(3)
        plan["delay"] = rng.uniform(0, 0.03)
    return plan


def run_job(base_dir, name, plan):
    """Starts a trial's job; returns (spec, process)."""
    trial_id = f"{os.getpid()}-{name}-{time.monotonic_ns()}"
    job_dir = os.path.join(base_dir, name)
    os.makedirs(job_dir)
    spec = {"dir": job_dir, "nranks": plan["nranks"], "seed": plan["seed"], "meet": plan["meet"],
            "steps": plan["steps"], "victim": plan.get("victim"), "mark_at": plan.get("mark_at"), "job": trial_id,
            "trial_id": trial_id}
    with open(os.path.join(job_dir, "spec.json"), "w") as f:
        json.dump(spec, f)
    timeout = STOP_TIMEOUT_S if plan["failure"] == "stop" else KILL_TIMEOUT_S
    env = dict(os.environ, NNPCCL_TRANSPORT=plan["transport"], NNPCCL_TIMEOUT=str(timeout), PYTHONUNBUFFERED="1")
    env.setdefault("NNPCCL_SOCKET_IFNAME", "lo")
    env[MARKER] = trial_id
    with open(os.path.join(job_dir, "output"), "wb") as out:
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "job", os.path.join(job_dir, "spec.json")],
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    return spec, proc


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _rendezvous_dir():
    """Where the library puts one-host rendezvous files (src/launch_env.cpp)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return runtime if runtime else f"/tmp/nnpccl-rendezvous-{os.getuid()}"


def _rendezvous_files(job):
    where = _rendezvous_dir()
    if not os.path.isdir(where):
        return []
    return [n for n in os.listdir(where) if n.startswith("nnpccl-") and n.endswith(f"-{job}.id")]


# One job's ranks init at a time: an init is the busiest part of a job (8
# ranks fault in their shared memory, libfabric loads its providers), and
# two of them on two cores can outlast the short NNPCCL_TIMEOUT of the stop
# trials, which bounds init too.
_INIT_LOCK = threading.Lock()


def start_trial_job(base_dir, plan, outcome):
    """Starts the trial's job and waits for every rank's init; returns
    (spec, process, pids), pids empty when init failed. An init that timed
    out under the stop trials' short NNPCCL_TIMEOUT (before any failure was
    injected) is tried again, twice at most, and counted."""
    n = plan["nranks"]
    for attempt in range(3):
        with _INIT_LOCK:
            spec, proc = run_job(base_dir, f"trial{plan['index']}" + f"-again{attempt}" * bool(attempt), plan)
            d, pids = spec["dir"], {}
            deadline = time.monotonic() + INIT_DEADLINE_S
            while len(pids) < n and time.monotonic() < deadline and proc.poll() is None:
                for r in range(n):
                    if r not in pids and (text := _read(os.path.join(d, f"ready{r}"))) is not None:
                        pids[r] = int(text)
                time.sleep(0.01)
        if len(pids) == n:
            return spec, proc, pids
        crashes = _crashes(d, n)
        if attempt < 2 and plan["failure"] == "stop" and "nnpccl.TimeoutError" in crashes:
            outcome["init_retries"] += 1
            _stop_all(_processes_of(spec["trial_id"]))
            proc.wait()
            continue
        outcome["problems"].append(f"only {len(pids)} of {n} ranks finished init; job output:\n"
                                   f"{_read(os.path.join(d, 'output'))}{crashes}")
        return spec, proc, {}


def run_trial(base_dir, plan):
    """One trial; returns its outcome: times, and what went wrong."""
    began = time.monotonic()
    outcome = dict(plan, problems=[], hang=False, leaks=[], times=[], wrong=[], init_retries=0, root_waited=False)
    problems = outcome["problems"]
    spec, proc, pids = start_trial_job(base_dir, plan, outcome)
    n, d, victim = plan["nranks"], spec["dir"], plan["victim"]
    try:
        if not pids:
            return outcome
        deadline = time.monotonic() + INIT_DEADLINE_S
        if plan["moment"] == "end":
            while not os.path.exists(os.path.join(d, "mark")) and time.monotonic() < deadline + 60:
                time.sleep(0.002)
        time.sleep(plan["delay"])
        vpid = pids[victim]
        try:
            os.kill(vpid, signal.SIGKILL if plan["failure"] == "kill" else signal.SIGSTOP)
        except ProcessLookupError:
            outcome["missed"] = True  # the victim had already finished
        injected = time.time()
        outcome["injected_at"] = injected
        bound = KILL_BOUND_S if plan["failure"] == "kill" else STOP_TIMEOUT_S + STOP_MARGIN_S
        hard = time.monotonic() + bound + TEARDOWN_S
        # Done when every survivor has exited (the job process reaps them),
        # or, rank 0, waits for the stopped rank's end (see run_rank).
        waits = os.path.join(d, "root-waits")
        while time.monotonic() < hard:
            left = [r for r in range(n) if r != victim and _alive(pids[r]) and not (r == 0 and os.path.exists(waits))]
            if not left:
                break
            time.sleep(0.02)
        if left:
            outcome["hang"] = True
            problems.append("still running at the deadline: " +
                            "; ".join(f"rank {r}: {_describe(pids[r])}" for r in left))
            _stop_all([pids[r] for r in left])
        _stop_all([vpid])
        with open(os.path.join(d, "victim-gone"), "w"):
            pass
        if os.path.exists(waits):
            outcome["root_waited"] = True
            until = time.monotonic() + FD_SETTLE_S + 5
            while _alive(pids[0]) and time.monotonic() < until:
                time.sleep(0.02)
            if _alive(pids[0]):
                outcome["hang"] = True
                problems.append(f"rank 0 still running {FD_SETTLE_S + 5} s after the stopped rank was killed: "
                                f"{_describe(pids[0])}")
        try:
            # Its ranks have ended or been killed: it has only to reap them,
            # which a loaded machine may not let it do for seconds.
            proc.wait(timeout=JOB_END_S)
        except subprocess.TimeoutExpired:
            problems.append("the job process did not end")
        time.sleep(0.02)
        stray = [p for p in _processes_of(spec["trial_id"]) if _alive(p)]
        if stray and not outcome["hang"]:
            outcome["leaks"].append("processes left: " + "; ".join(_describe(p) for p in stray))
        for r in range(n):
            if r == victim:
                continue
            report_text = _read(os.path.join(d, f"rank{r}.json"))
            if report_text is None:
                crash = _read(os.path.join(d, f"crash{r}"))
                if crash:
                    problems.append(f"rank {r} crashed: {crash}")
                elif not outcome["hang"]:
                    problems.append(f"rank {r} left no report")
                continue
            check_survivor(outcome, json.loads(report_text), injected, bound)
        ended = _read(os.path.join(d, "ended.json"))
        if ended:
            for r, status in json.loads(ended).items():
                if int(r) != victim and status != 0:
                    problems.append(f"rank {r} ended with wait status {status:#x}")
    finally:
        _stop_all(_processes_of(spec["trial_id"]))
        if proc.poll() is None:
            _stop_all([proc.pid])
            proc.wait()
        if _rendezvous_files(spec["job"]):
            outcome["leaks"].append(f"rendezvous files left in {_rendezvous_dir()}: {_rendezvous_files(spec['job'])}")
        outcome["seconds"] = time.monotonic() - began
    return outcome


def _crashes(d, n):
    return "".join(f"\nrank {r}: {_read(os.path.join(d, f'crash{r}'))}" for r in range(n)
                   if _read(os.path.join(d, f"crash{r}")))


def check_survivor(outcome, rep, injected, bound):
    r, victim = rep["rank"], outcome["victim"]
    problems = outcome["problems"]
    if rep["other"]:
        outcome["wrong"].append(f"rank {r}: not an nnpccl error: {rep['other']}")
    for bad in rep["corrupt"]:
        problems.append(f"rank {r}: wrong output before the failure: {bad}")
    if not rep["errors"] and (outcome["moment"] == "run" or rep["steps"] != outcome["steps"]):
        # At the end a rank may finish before the failure.
        outcome["wrong"].append(f"rank {r} saw no error after {rep['steps']} steps")
    for when, kind, code, message in rep["errors"]:
        seconds = when - injected
        outcome["times"].append(seconds)
        expected = "RemoteError" if outcome["failure"] == "kill" else "TimeoutError"
        codes = {"RemoteError": 5, "TimeoutError": 6}
        if kind != expected or code != codes[expected]:
            outcome["wrong"].append(f"rank {r}: {kind} (code {code}), not {expected}: {message}")
        elif not re.search(rf"\brank {victim}\b", message):
            outcome["wrong"].append(f"rank {r}: the error does not name rank {victim}: {message}")
        if seconds < 0:
            outcome["wrong"].append(f"rank {r}: failed {-seconds:.2f} s before the failure was injected: {message}")
        elif seconds > bound:
            problems.append(f"rank {r}: error {seconds:.2f} s after the {outcome['failure']} (bound {bound} s): "
                            f"{message}")
    if rep["fds_after"] > rep["fds_before"] or rep["fds_left"]:
        outcome["leaks"].append(f"rank {r}: {rep['fds_before']} descriptors before init, {rep['fds_after']} "
                                f"{FD_SETTLE_S} s after {rep['teardown']}: {rep['fds_left']}")


def run_healthy(base_dir, name, transport, meet="env", nranks=4, steps=40):
    """A fresh job that must run its whole sequence, right, and leave
    nothing behind."""
    plan = {"nranks": nranks, "meet": meet, "seed": random.getrandbits(48), "failure": "none",
            "transport": transport, "steps": steps}
    spec, proc = run_job(base_dir, name, plan)
    problems = []
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        problems.append("a healthy job hung: " + "; ".join(_describe(p) for p in _processes_of(spec["trial_id"])))
        _stop_all(_processes_of(spec["trial_id"]))
        proc.wait()
    d = spec["dir"]
    for r in range(nranks):
        text = _read(os.path.join(d, f"rank{r}.json"))
        if text is None:
            problems.append(f"rank {r} of a healthy job left no report: {_read(os.path.join(d, f'crash{r}'))}"
                            f"\n{_read(os.path.join(d, 'output'))}")
            continue
        rep = json.loads(text)
        if rep["errors"] or rep["other"] or rep["corrupt"] or rep["steps"] != steps:
            problems.append(f"rank {r} of a healthy {transport} job: {rep['errors'] or rep['other'] or rep['corrupt']}"
                            f" after {rep['steps']} steps")
        if rep["fds_after"] > rep["fds_before"] or rep["fds_left"]:
            problems.append(f"rank {r} of a healthy job left descriptors: {rep['fds_left']}")
    ended = _read(os.path.join(d, "ended.json"))
    if ended and any(s != 0 for s in json.loads(ended).values()):
        problems.append(f"healthy job's ranks ended with {ended}")
    if [p for p in _processes_of(spec["trial_id"]) if _alive(p)]:
        problems.append("a healthy job left processes")
    return [f"{name} ({transport}, {meet}): {p}" for p in problems]


def summary(outcomes):
    rows = []
    header = ("failure", "transport", "ranks", "trials", "at the end", "max time to error (s)", "hangs", "leaks",
              "wrong errors", "other problems")
    for failure in ("kill", "stop"):
        for transport in ("shm", "ofi"):
            group = [o for o in outcomes if o["failure"] == failure and o["transport"] == transport]
            if not group:
                continue
            ranks = sorted({o["nranks"] for o in group})
            times = [t for o in group for t in o["times"]]
            rows.append((failure, transport, f"{ranks[0]}-{ranks[-1]}", str(len(group)),
                         str(sum(o["moment"] == "end" for o in group)),
                         f"{max(times):.2f}" if times else "-", str(sum(o["hang"] for o in group)),
                         str(sum(bool(o["leaks"]) for o in group)), str(sum(bool(o["wrong"]) for o in group)),
                         str(sum(bool(o["problems"]) and not o["hang"] for o in group))))
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def test_chaos(tmp_path, capsys):
    seed = int(os.environ.get("NNPCCL_CHAOS_SEED") or random.SystemRandom().getrandbits(32))
    trials = int(os.environ.get("NNPCCL_CHAOS_TRIALS", "20"))
    jobs = max(1, int(os.environ.get("NNPCCL_CHAOS_JOBS", "2")))
    only = os.environ.get("NNPCCL_CHAOS_TRIAL")
    indices = [int(only)] if only else list(range(trials))
    with capsys.disabled():
        print(f"\nchaos: NNPCCL_CHAOS_SEED={seed}, {len(indices)} trial(s), {jobs} at a time", flush=True)
    base = str(tmp_path)
    started = time.monotonic()
    # Jobs that must work before any failure, so that a failing one later
    # is the trials' doing.
    healthy = (run_healthy(base, "healthy-before-shm", "shm", steps=20) +
               run_healthy(base, "healthy-before-ofi", "ofi", "uid", steps=20))
    outcomes = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for block in range(0, len(indices), 10):
            plans = [trial_plan(seed, i) for i in indices[block:block + 10]]
            outcomes += pool.map(lambda p: run_trial(base, p), plans)
            if block + 10 < len(indices):
                # A fresh job among the trials' debris.
                healthy += run_healthy(base, f"healthy-after-{block + 10}", ("shm", "ofi")[block // 10 % 2],
                                       ("uid", "env")[block // 10 % 2], nranks=5, steps=20)
    healthy += run_healthy(base, "healthy-after-shm", "shm", "uid", nranks=8)
    healthy += run_healthy(base, "healthy-after-ofi", "ofi", "env", nranks=8)
    failed = [o for o in outcomes if o["problems"] or o["hang"] or o["leaks"] or o["wrong"]]
    with capsys.disabled():
        print(f"chaos: {len(outcomes)} trials in {time.monotonic() - started:.0f} s (seed {seed})")
        print(summary(outcomes), flush=True)
        waited = [o["index"] for o in outcomes if o["root_waited"]]
        if waited:
            print(f"chaos: rank 0's process kept the rendezvous root's sockets until the stopped rank was killed "
                  f"in trial(s) {waited}", flush=True)
        retried = [o["index"] for o in outcomes if o["init_retries"]]
        if retried:
            print(f"chaos: init timed out under the stop trials' NNPCCL_TIMEOUT={STOP_TIMEOUT_S} and was tried "
                  f"again in trial(s) {retried}", flush=True)
    report = []
    for o in failed:
        when = (f"{o['delay']:.2f} s after init" if o["moment"] == "run" else
                f"{o['delay'] * 1000:.0f} ms after its step {o['mark_at']} of {o['steps']}")
        report.append(f"trial {o['index']} ({o['failure']} rank {o['victim']} of {o['nranks']} over "
                      f"{o['transport']}, met by {o['meet']}, {when}; reproduce with "
                      f"NNPCCL_CHAOS_SEED={seed} NNPCCL_CHAOS_TRIAL={o['index']}):")
        report += [f"  {p}" for p in o["problems"] + o["wrong"] + o["leaks"]]
    assert not failed and not healthy, "\n".join(report + healthy)


if __name__ == "__main__":
    if sys.argv[1] == "job":
        sys.exit(job_main(sys.argv[2]))
