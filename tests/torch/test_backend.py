"""torch.distributed over nnpccl, checked against Gloo in the same torch."""

import os
import subprocess
import sys

import pytest

# Run directly (not through meson test, which says why before pytest
# starts), the suite skips without torch or the module, except in CI.
try:
    import torch  # noqa: F401
    import nnpccl_torch  # noqa: F401
except ImportError as e:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip(f"the PyTorch backend cannot be tested: {e} (build it, and put build/python on PYTHONPATH)",
                allow_module_level=True)

import harness  # noqa: E402
import workers  # noqa: E402


# One job of 2 ranks and one of 3 run every section: starting ranks (each
# imports torch) costs more than the checks.
SECTIONS = {2: ["ops_matrix", "unsupported", "ddp", "released_by_callback"], 3: ["ops_matrix", "groups"]}


@pytest.fixture(scope="module")
def jobs():
    cache = {}

    def get(world):
        # A job that failed fails every test of it, without running again.
        if world not in cache:
            try:
                cache[world] = harness.run_ranks(workers.session, world, SECTIONS[world], harness.free_port(),
                                                 timeout=100)
            except AssertionError as e:
                cache[world] = e
        if isinstance(cache[world], AssertionError):
            raise cache[world]
        return cache[world]

    return get


def failures_of(results, section):
    return [f for r in results for f in r[section]]


@pytest.mark.parametrize("world", [2, 3])
def test_every_op_dtype_and_reduce_op_matches_gloo(jobs, world):
    results = jobs(world)
    counts = [r["ops_matrix"][0] if isinstance(r["ops_matrix"], tuple) else 0 for r in results]
    failures = [f for r in results if not isinstance(r["ops_matrix"], tuple) for f in r["ops_matrix"]]
    failures += [f for r in results if isinstance(r["ops_matrix"], tuple) for f in r["ops_matrix"][1]]
    assert not failures, "\n".join(failures[:40])
    assert all(c > 400 for c in counts), counts


@pytest.mark.parametrize("world", [2, 3])
def test_init_and_wait_release_the_gil(jobs, world):
    assert not failures_of(jobs(world), "init")


def test_unsupported_input_raises_and_leaves_the_group_usable(jobs):
    assert not failures_of(jobs(2), "unsupported")


def test_new_group_reinit_and_timeout(jobs):
    assert not failures_of(jobs(3), "groups")


def test_a_callback_may_release_the_group(jobs):
    assert not failures_of(jobs(2), "released_by_callback")


def test_ddp_is_bit_identical_to_gloo(jobs):
    # On 2 ranks each gradient is reduced as one a + b, which rounds alike in
    # any order, so DDP's parameters must match Gloo's bit for bit.
    assert not failures_of(jobs(2), "ddp")


def test_killed_rank_fails_the_others_within_5_s():
    victim = 2
    results = harness.run_ranks(workers.killed, 3, victim, timeout=60, allow_exit=(victim,))
    for rank, result in enumerate(results):
        if rank == victim:
            continue
        delay, msg = result
        assert delay is not None, f"rank {rank}: {msg}"
        assert delay < 5.0, f"rank {rank} learned of the death after {delay:.2f} s: {msg}"
        assert "nnpccl error" in msg and f"rank {victim}" in msg, f"rank {rank}: the error is not nnpccl's naming rank {victim}: {msg}"


def test_torch_multiprocessing_spawn(tmp_path):
    import torch.multiprocessing

    torch.multiprocessing.spawn(workers.spawned, args=(2, harness.free_port(), str(tmp_path)), nprocs=2)
    for rank in range(2):
        assert (tmp_path / f"rank{rank}").read_text() == "[1.5, 1.5, 1.5]"


TORCHRUN_SCRIPT = r"""
import torch, torch.distributed as dist
import nnpccl_torch
dist.init_process_group("nnpccl")
t = torch.full((4,), float(dist.get_rank() + 1))
dist.all_reduce(t)
assert t.tolist() == [3.0] * 4, t
assert dist.get_backend() == "nnpccl"
dist.destroy_process_group()
print("rank", dist.get_rank() if dist.is_initialized() else "done", "ok")
"""


def test_torchrun(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TORCHRUN_SCRIPT)
    env = dict(os.environ, NNPCCL_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    # torch 1.13's torchrun cannot parse its own default --redirects 0 and
    # --tee 0 on Python 3.11 (flag enums no longer list 0 as a member),
    # which is Debian 12's; stdout through tee parses, and keeps the output.
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2",
           "--redirects=1", "--tee=1", f"--log_dir={tmp_path / 'logs'}",
           "--master_addr=127.0.0.1", f"--master_port={harness.free_port()}", str(script)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("done ok") == 2, proc.stdout + proc.stderr
