"""What PyTorch users lean on beyond the collectives themselves: DDP comm
hooks whose callbacks wait on collectives, a peer that leaves, the
profiler's spans."""

import os

import pytest

try:
    import torch  # noqa: F401
    import nnpccl_torch  # noqa: F401
except ImportError as e:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip(f"the PyTorch backend cannot be tested: {e} (build it, and put build/python on PYTHONPATH)",
                allow_module_level=True)

import harness  # noqa: E402
import workers_framework  # noqa: E402

HOOK_STEPS = 12


@pytest.fixture(scope="module")
def hook_results():
    return harness.run_ranks(workers_framework.comm_hooks, 2, HOOK_STEPS, timeout=150)


@pytest.mark.parametrize("hook", sorted(workers_framework.HOOK_REFERENCES))
def test_comm_hook_under_ddp_matches_gloo(hook_results, hook):
    # On 2 ranks every sum is one a + b, rounded alike by any algorithm, so
    # the parameters must be Gloo's bit for bit. PowerSGD and the chained
    # hook wait inside a future's callback for another collective of the
    # group, which must neither deadlock nor wait out a timeout.
    for rank, result in enumerate(hook_results):
        seconds, differing, total = result[hook]
        assert differing == 0, f"rank {rank} {hook}: {differing} of {total} parameters differ from Gloo's"
        assert seconds < 30, f"rank {rank} {hook}: {HOOK_STEPS} steps took {seconds:.1f} s"


@pytest.mark.parametrize("how", ["exception", "destroy", "exit"])
def test_a_peer_that_leaves_fails_the_others_wait_within_about_a_second(how):
    world = 3
    leaver = world - 1
    results = harness.run_ranks(workers_framework.leaving_peer, world, how, timeout=60, allow_exit=(leaver,),
                                allow_error=(leaver,))
    for rank in range(leaver):
        delay, message, later = results[rank]
        assert delay is not None, f"rank {rank}: {message}"
        assert delay < 2.0, f"rank {rank}: wait() raised {delay:.2f} s after rank {leaver} left ({how}): {message}"
        assert f"rank {leaver}" in message, f"rank {rank}: the error does not name rank {leaver}: {message}"
        assert isinstance(later, tuple), f"rank {rank}: {later}"
        assert later[0] < 2.0, f"rank {rank}: a later all_reduce took {later[0]:.2f} s to fail: {later[1]}"


def test_a_process_with_pending_work_exits_promptly():
    exit_times = {}
    results = harness.run_ranks(workers_framework.exit_with_pending_work, 2, timeout=60, allow_exit=(1,),
                                exit_times=exit_times)
    returned_at = results[0]
    assert exit_times[0] - returned_at < 3.0, \
        f"rank 0 took {exit_times[0] - returned_at:.1f} s to exit with a receive pending from a rank that had left"


def test_each_collective_records_a_profiler_span():
    results = harness.run_ranks(workers_framework.profiled, 2, timeout=60)
    common = {"nnpccl:all_reduce", "nnpccl:broadcast", "nnpccl:reduce", "nnpccl:all_gather", "nnpccl:gather",
              "nnpccl:scatter", "nnpccl:reduce_scatter", "nnpccl:all_to_all", "nnpccl:barrier"}
    assert common | {"nnpccl:send"} <= set(results[0]), results[0]
    assert common | {"nnpccl:recv"} <= set(results[1]), results[1]


def test_monitored_barrier_names_the_missing_rank_and_leaves_the_group_usable():
    results = harness.run_ranks(workers_framework.monitored, 2, timeout=60)
    error, total = results[0]
    assert error is not None and "Rank 1 failed to pass monitoredBarrier" in error, error
    assert all(r[1] == [2.0, 2.0] for r in results), results
