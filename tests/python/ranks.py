"""Runs a test body on ranks in spawned processes of their own and reports
the first rank's failure, or a rank that died by a signal, by name."""

import multiprocessing as mp
import queue
import traceback

import nnpccl


def run_ranks(nranks, body, *args, timeout=120, comm_timeout=60):
    """body(comm, *args) on `nranks` ranks; returns their return values by rank."""
    uid = nnpccl.get_unique_id()
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_rank_main, args=(nranks, uid, r, comm_timeout, body, args, results))
             for r in range(nranks)]
    for p in procs:
        p.start()
    outcomes = {}
    try:
        for _ in procs:
            rank, ok, value = results.get(timeout=timeout)
            outcomes[rank] = (ok, value)
    except queue.Empty:
        pass
    for p in procs:
        p.join(timeout=30)
        if p.is_alive():
            p.kill()
            p.join()
    died = [f"rank {r} died by signal {-p.exitcode}" for r, p in enumerate(procs) if p.exitcode and p.exitcode < 0]
    assert not died, "; ".join(died)
    missing = [r for r in range(nranks) if r not in outcomes]
    assert not missing, f"ranks {missing} reported nothing within {timeout} s"
    failures = [value for ok, value in outcomes.values() if not ok]
    assert not failures, failures[0]
    return [outcomes[r][1] for r in range(nranks)]


def _rank_main(nranks, uid, rank, comm_timeout, body, args, results):
    try:
        comm = nnpccl.Communicator(nranks, uid, rank, timeout=comm_timeout)
        value = body(comm, *args)
        comm.destroy()
        results.put((rank, True, value))
    except BaseException:  # the parent reports any rank's failure
        results.put((rank, False, f"rank {rank}: {traceback.format_exc()}"))
