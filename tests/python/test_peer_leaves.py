"""A peer that leaves is a failure for whoever still needs it: when rank 1
destroys its communicator, aborts it, exits without destroying it, dies
through an uncaught exception or is killed, rank 0's call that needs it
(one it is already blocked in, or one it makes afterwards; blocking or a
request's wait()) raises RemoteError naming rank 1 within about a second,
never a TimeoutError at the deadline; and a process that ends with
unfinished work exits at once, its peer's call failing the same way. Each
rank is a process of its own running this file, over shared memory, sockets
and libfabric."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import nnpccl

DEADLINE = 10  # the communicators' timeout: well beyond the failures asked for
PROMPTLY = 2.5  # seconds: "about a second", with a margin for a loaded machine


def survivor(comm, args):
    """Rank 0: calls allreduce until one fails; reports when and how."""
    import numpy as np
    if args["when"] == "later":
        time.sleep(1.0)  # rank 1 has left by now
    data = np.ones(1 << 14, np.float32)
    try:
        for _ in range(100000):
            if args["call"] == "wait":
                comm.iallreduce(data).wait()
            else:
                comm.allreduce(data)
    except nnpccl.Error as e:
        return {"at": time.time(), "kind": type(e).__name__, "message": str(e)}
    return {"at": time.time(), "kind": "none", "message": "every call succeeded"}


def leaver(comm, args):
    """Rank 1: leaves the way args["how"] says, having told when."""
    import numpy as np
    if args["when"] == "inside":
        time.sleep(0.5)  # rank 0 is blocked in its first allreduce by now
    if args["how"].startswith("pending"):
        # Unfinished work, the same calls rank 0 makes but has not made yet
        # (it comes "later"): an allreduce whose request is held, and one
        # whose request is dropped.
        held = comm.iallreduce(np.ones(1 << 14, np.float32))  # noqa: F841 - held until exit
        comm.iallreduce(np.ones(1 << 14, np.float32))
    _record(args, "left", time.time())
    how = args["how"]
    if how == "destroy":
        comm.destroy()
    elif how == "abort":
        comm.abort()
    elif how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif how in ("exception", "pending_exception"):
        raise RuntimeError("rank 1 leaves through an exception")
    elif how in ("exit", "pending"):
        sys.exit(0)
    # Destroyed or aborted, the process stays until rank 0 has its answer:
    # its absence is not the signal.
    deadline = time.monotonic() + DEADLINE + 5
    while not os.path.exists(os.path.join(args["dir"], "survivor")) and time.monotonic() < deadline:
        time.sleep(0.05)


def _record(args, name, value):
    with open(os.path.join(args["dir"], name), "w") as f:
        json.dump(value, f)


def rank_main(rank, uid_hex, args):
    comm = nnpccl.Communicator(2, bytes.fromhex(uid_hex), rank, timeout=DEADLINE)
    comm.barrier()
    if rank == 0:
        _record(args, "survivor", survivor(comm, args))
        comm.abort()
    else:
        leaver(comm, args)


def run_pair(tmp_path, how, when="inside", call="blocking", transport="shm"):
    args = {"how": how, "when": when, "call": call, "dir": str(tmp_path)}
    uid = nnpccl.get_unique_id().hex()
    env = dict(os.environ, NNPCCL_TRANSPORT=transport)
    procs = [subprocess.Popen([sys.executable, __file__, str(r), uid, json.dumps(args)], env=env,
                              stderr=subprocess.PIPE, text=True) for r in range(2)]
    try:
        procs[0].wait(timeout=DEADLINE + 30)
        left_at = json.loads((tmp_path / "left").read_text())
        procs[1].wait(timeout=20)
        ended_at = time.time()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    outcome = json.loads((tmp_path / "survivor").read_text())
    return left_at, outcome, ended_at, [p.stderr.read() for p in procs], [p.returncode for p in procs]


def check_named_promptly(left_at, outcome, logs):
    assert outcome["kind"] == "RemoteError", (outcome, logs[1][-2000:])
    assert "rank 1" in outcome["message"], outcome
    assert outcome["at"] - left_at < PROMPTLY, (round(outcome["at"] - left_at, 2), outcome)


HOWS = ["destroy", "abort", "exit", "exception", "kill"]


@pytest.mark.parametrize("when", ["inside", "later"])
@pytest.mark.parametrize("how", HOWS)
def test_a_peer_that_leaves_fails_the_survivor_promptly_naming_it(tmp_path, how, when):
    left_at, outcome, _, logs, _ = run_pair(tmp_path, how, when)
    check_named_promptly(left_at, outcome, logs)


@pytest.mark.parametrize("how", ["destroy", "exception"])
def test_a_request_wait_raises_when_the_peer_leaves(tmp_path, how):
    left_at, outcome, _, logs, _ = run_pair(tmp_path, how, call="wait")
    check_named_promptly(left_at, outcome, logs)


@pytest.mark.parametrize("transport", ["socket", "ofi"])
@pytest.mark.parametrize("how", ["destroy", "exception", "kill"])
def test_a_peer_that_leaves_over_the_network_transports(tmp_path, how, transport):
    left_at, outcome, _, logs, _ = run_pair(tmp_path, how, transport=transport)
    check_named_promptly(left_at, outcome, logs)


@pytest.mark.parametrize("how", ["pending", "pending_exception"])
def test_a_process_with_unfinished_work_exits_at_once(tmp_path, how):
    left_at, outcome, ended_at, logs, codes = run_pair(tmp_path, how, when="later")
    assert codes[1] == (0 if how == "pending" else 1), (codes, logs[1][-2000:])
    assert "Traceback" in logs[1] if how == "pending_exception" else "Traceback" not in logs[1], logs[1][-2000:]
    check_named_promptly(left_at, outcome, logs)
    # Rank 1's process was waited for after rank 0's: it had ended by then.
    assert ended_at - left_at < PROMPTLY + 2, round(ended_at - left_at, 2)


if __name__ == "__main__":
    rank_main(int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3]))
