"""torch's own distributed test suite (DistributedTest._DistTestBase from
torch/testing/_internal/distributed/distributed_test.py, as torch's
test/distributed/test_distributed_spawn.py runs it for Gloo), run against the
backend named by NNPCCL_SUITE_BACKEND ("gloo" or "nnpccl").

The suite decides which cases run by the name in $BACKEND, read when
distributed_test is imported: most CPU cases are gated to gloo, nccl or mpi.
So $BACKEND is always "gloo" here, and for nnpccl the group is created as
nnpccl wherever the suite asks torch.distributed for a gloo group: the same
cases then run against nnpccl, and only those that assert the backend's name
can tell the difference.

Set before importing this module: NNPCCL_SUITE_BACKEND, WORLD_SIZE and
TEMP_DIR (the suite's own file barrier lives there). Child processes import
it again (multiprocessing spawn), with the same environment."""

import os

os.environ["BACKEND"] = "gloo"
SUITE_BACKEND = os.environ.get("NNPCCL_SUITE_BACKEND", "gloo")
if SUITE_BACKEND not in ("gloo", "nnpccl"):
    raise ValueError(f"NNPCCL_SUITE_BACKEND must be gloo or nnpccl, not {SUITE_BACKEND!r}")

import torch.distributed as dist  # noqa: E402
import torch.distributed.distributed_c10d as c10d  # noqa: E402

if SUITE_BACKEND == "nnpccl":
    import nnpccl_torch  # noqa: F401, E402 - registers the backend

    def _as_nnpccl(backend):
        if backend is not None and str(backend).lower() == "gloo":
            return "nnpccl"
        return backend

    def _wrap(create):
        def create_as_nnpccl(*args, **kwargs):
            if "backend" in kwargs:
                kwargs["backend"] = _as_nnpccl(kwargs["backend"])
            elif create is _init_process_group and args:
                args = (_as_nnpccl(args[0]),) + tuple(args[1:])
            elif create is _new_group and len(args) >= 3:
                args = tuple(args[:2]) + (_as_nnpccl(args[2]),) + tuple(args[3:])
            return create(*args, **kwargs)

        create_as_nnpccl.__wrapped__ = create
        return create_as_nnpccl

    _init_process_group = c10d.init_process_group
    _new_group = c10d.new_group
    for module in (dist, c10d):
        module.init_process_group = _wrap(_init_process_group)
        module.new_group = _wrap(_new_group)

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    """What test_distributed_spawn.py defines for BACKEND=gloo. Its ranks are
    forked unless NNPCCL_SUITE_START is "spawn" (as torch starts them):
    a spawned rank imports torch and the suite again, seconds of CPU per
    rank and case, which the fork saves; the cases' behaviour is the same,
    since the parent creates no process group and runs no torch op."""

    def setUp(self):
        super().setUp()
        if os.environ.get("NNPCCL_SUITE_START", "fork") == "spawn":
            self._spawn_processes()
        else:
            import torch.multiprocessing

            self._start_processes(torch.multiprocessing.get_context("fork").Process)


def torch_version():
    import torch

    return torch.__version__
