"""Runs a function on N local ranks, each a fresh process (spawn), and hands
back what each returned or where it failed.

torch.multiprocessing.spawn stops every rank once one dies, which the test of
a killed rank must not do; this launcher waits for every rank, or kills the
stragglers at a deadline and says which ranks hung."""

import multiprocessing
import os
import queue
import socket
import time
import traceback


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _child(fn, rank, world, port, results, args):
    os.environ["NNPCCL_SOCKET_IFNAME"] = "lo"
    # Gloo, the reference, would otherwise listen on the host name's address.
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    try:
        import torch

        # Two cores are shared by every rank of a test: intra-op threads
        # would only make the ranks compete for them.
        torch.set_num_threads(1)
        results.put((rank, "ok", fn(rank, world, *args)))
    except BaseException:  # noqa: B902 - any failure, reported to the parent
        results.put((rank, "error", traceback.format_exc()))


def run_ranks(fn, world, *args, timeout=60.0, allow_exit=(), allow_error=(), exit_times=None):
    """Runs fn(rank, world, *args) on ranks 0..world-1 and returns the list of
    their return values. fn finds MASTER_ADDR/MASTER_PORT set to a free port
    on 127.0.0.1. Ranks in allow_exit may die without reporting (their entry
    is None); ranks in allow_error may raise (their entry is the traceback).
    exit_times, a dict, receives each rank's time.time() at its process's
    end. Raises AssertionError naming the ranks that failed or hung."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_child, args=(fn, r, world, port, results, args)) for r in range(world)]
    for p in procs:
        p.start()
    out = {}
    errors = []
    deadline = time.monotonic() + timeout
    exited_at = {}
    while len(out) < world:
        try:
            rank, status, value = results.get(timeout=0.2)
        except queue.Empty:
            now = time.monotonic()
            for r in range(world):
                if r not in out and procs[r].exitcode is not None:
                    exited_at.setdefault(r, now)
            # A result can still be in the pipe just after its rank exited.
            silent = [r for r, t in exited_at.items() if r not in out and now - t > 1.0]
            for r in silent:
                if r not in allow_exit:
                    errors.append(f"rank {r} exited with status {procs[r].exitcode} without a result")
                out[r] = None
            if time.monotonic() > deadline:
                hung = [r for r in range(world) if r not in out]
                errors.append(f"ranks {hung} did not finish within {timeout} s")
                break
            continue
        out[rank] = value
        if status != "ok" and rank not in allow_error:
            errors.append(f"rank {rank} failed:\n{value}")
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()) + 5)
        if exit_times is not None and not p.is_alive():
            exit_times[procs.index(p)] = time.time()
        if p.is_alive():
            p.kill()
            p.join()
    assert not errors, "\n".join(errors)
    return [out.get(r) for r in range(world)]
