"""Failures of a rank in a job started the torchrun way (nnpccl_comm_init_from_env,
where rank 0's process hosts the rendezvous root), over shared memory and
over libfabric: when rank 0 is killed, every survivor's call fails within
5 s naming rank 0; when a rank is stopped (SIGSTOP), the others' calls end
in a timeout naming it."""

import os
import signal
import subprocess
import sys
import time

import pytest

CALLS_BEFORE_FAILURE = 50


def rank_main(how, out_dir):
    import numpy as np
    import nnpccl
    comm = nnpccl.Communicator.from_env(timeout=3)
    data = np.ones(1 << 14, np.float32)
    victim = 0 if how == "kill" else comm.size - 1
    for i in range(100000):
        if comm.rank == victim and i == CALLS_BEFORE_FAILURE:
            with open(os.path.join(out_dir, "failed_at"), "w") as f:
                f.write(repr(time.time()))
            os.kill(os.getpid(), signal.SIGKILL if how == "kill" else signal.SIGSTOP)
        try:
            comm.allreduce(data)
        except nnpccl.Error as e:
            with open(os.path.join(out_dir, f"rank{comm.rank}"), "w") as f:
                f.write(f"{time.time()!r}\n{type(e).__name__}\n{e}\n")
            comm.abort()
            return 0
    return 1


def run_job(tmp_path, how, transport, nranks=3):
    job = f"{os.getpid()}-{time.monotonic_ns()}"
    procs = []
    for r in range(nranks):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(nranks), LOCAL_WORLD_SIZE=str(nranks),
                   TORCHELASTIC_RUN_ID=job, NNPCCL_TRANSPORT=transport)
        env.pop("MASTER_ADDR", None)
        procs.append(subprocess.Popen([sys.executable, __file__, how, str(tmp_path)], env=env))
    victim = 0 if how == "kill" else nranks - 1
    try:
        for r, p in enumerate(procs):
            if r != victim:
                assert p.wait(timeout=60) == 0, f"rank {r} did not end in an error"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    failed_at = float((tmp_path / "failed_at").read_text())
    reports = {}
    for r in range(nranks):
        if r != victim:
            when, kind, message = (tmp_path / f"rank{r}").read_text().split("\n", 2)
            reports[r] = (float(when) - failed_at, kind, message)
    return victim, reports


@pytest.mark.parametrize("transport", ["shm", "ofi"])
def test_killed_root_host_is_named_by_every_survivor_within_5_s(tmp_path, transport):
    victim, reports = run_job(tmp_path, "kill", transport)
    for r, (seconds, kind, message) in reports.items():
        assert kind == "RemoteError", (r, message)
        assert f"rank {victim}" in message, (r, message)
        assert seconds < 5, (r, seconds, message)


@pytest.mark.parametrize("transport", ["shm", "ofi"])
def test_stopped_rank_ends_in_a_timeout_naming_it(tmp_path, transport):
    victim, reports = run_job(tmp_path, "stop", transport)
    for r, (seconds, kind, message) in reports.items():
        assert kind == "TimeoutError", (r, message)
        assert "NNPCCL_TIMEOUT" in message, (r, message)
        if transport == "shm":
            # Shared memory sees which process has stopped showing signs of
            # life; the first rank to time out names it, the rest relay that.
            assert f"rank {victim} (pid" in message and "no sign of life" in message, (r, message)
        else:
            # Over libfabric a rank names whom it waits on, which may be a
            # neighbour that waits on the stopped rank.
            assert "from rank" in message or "towards rank" in message, (r, message)
        assert seconds < 3 + 2, (r, seconds, message)


if __name__ == "__main__":
    sys.exit(rank_main(sys.argv[1], sys.argv[2]))
