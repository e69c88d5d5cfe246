"""Reproducible by default: the same job (ranks, inputs, settings) gives the
same bits on every run and every call. The inputs are random floats, whose
sums depend on the order of addition, so a plan that changed between runs
or calls (another algorithm, another split) would show."""

import hashlib

import numpy as np

from test_nnpccl import run_ranks

COUNTS = [1 << k for k in range(4, 23, 3)]  # 16 .. 4M elements


def sweep(comm):
    """Every call's output bits, hashed per call, in call order."""
    rng = np.random.default_rng(1234 + comm.rank)
    digests = []
    for count in COUNTS:
        data = rng.standard_normal(count).astype(np.float32)
        for _ in range(2):
            out = comm.allreduce(data, np.empty_like(data))
            digests.append(hashlib.blake2b(out.tobytes(), digest_size=8).hexdigest())
            block = np.empty(count // comm.size, np.float32)
            comm.reduce_scatter(data[:block.size * comm.size], block)
            digests.append(hashlib.blake2b(block.tobytes(), digest_size=8).hexdigest())
    return digests


def report(comm, path):
    digests = sweep(comm)
    # Both calls of each size gave the same bits.
    for k in range(0, len(digests), 4):
        assert digests[k] == digests[k + 2] and digests[k + 1] == digests[k + 3], f"call {k} differs on repeat"
    with open(f"{path}.{comm.rank}", "w") as f:
        f.write("\n".join(digests))


def test_same_job_twice_gives_the_same_bits(tmp_path, monkeypatch):
    monkeypatch.delenv("NNPCCL_TUNE", raising=False)  # the default; NNPCCL_TUNE=1 fails this test
    runs = []
    for run in range(2):
        run_ranks(4, report, str(tmp_path / f"run{run}"))
        runs.append([(tmp_path / f"run{run}.{r}").read_text().split("\n") for r in range(4)])
    for rank in range(4):
        assert runs[0][rank] == runs[1][rank], f"rank {rank}'s results differ between two runs of the same job"
    # An allreduce's output is the same on every rank.
    allreduce_digests = [[d for k, d in enumerate(runs[0][rank]) if k % 2 == 0] for rank in range(4)]
    assert all(d == allreduce_digests[0] for d in allreduce_digests)
