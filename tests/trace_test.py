#!/usr/bin/python3
"""NNPCCL_TRACE=FILE (src/trace.hpp): real ccl-bench jobs write one Chrome
trace-event file, valid JSON whenever a reader holds the lock the ranks
write under; every rank is a process named "rank N" with every operation,
the steps of an operation lie within it, a channel's steps one after
another, and the bytes the steps move are what the schedule moves. A path
that cannot be written fails init, naming the variable and the path.

An aborted communicator writes its timeline too, the operation it never
finished marked so.

Usage: trace_test.py CCL_BENCH PACKAGE_PARENT_DIR LIBNNPCCL"""

import array
import fcntl
import json
import multiprocessing as mp
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import traceback

BENCH = sys.argv[1]
os.environ["NNPCCL_LIBRARY"] = sys.argv[3]
sys.path.insert(0, sys.argv[2])
NP = 3
EPS = 0.002  # µs: timestamps are written with ns precision
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def locked_read(path):
    """The file as a rank's write leaves it: read under a shared flock."""
    with open(path, "rb") as f:
        fcntl.flock(f, fcntl.LOCK_SH)
        try:
            return f.read()
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run_traced(path, args):
    """Runs ccl-bench with NNPCCL_TRACE=path, parsing the file whenever it
    changes while the job runs; returns the events it holds at the end."""
    env = dict(os.environ, NNPCCL_TRACE=path)
    with open(path, "w") as f:
        f.write("left over from an earlier job, not JSON")  # init starts the file afresh
    done = threading.Event()
    seen = {"states": 0, "bad": None}

    def watch():
        last = None
        while not done.is_set():
            text = locked_read(path)
            if text != last and text.strip() and not text.startswith(b"left over"):
                last = text
                seen["states"] += 1
                try:
                    json.loads(text)
                except ValueError as e:
                    seen["bad"] = "%s (%d bytes)" % (e, len(text))
            done.wait(0.002)

    watcher = threading.Thread(target=watch)
    watcher.start()
    proc = subprocess.run([BENCH] + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)
    done.set()
    watcher.join()
    check(proc.returncode == 0, "ccl-bench %s: exit %d: %s" % (" ".join(args), proc.returncode, proc.stderr))
    check(seen["bad"] is None, "the file was not valid JSON between writes: %s" % seen["bad"])
    with open(path) as f:
        events = json.load(f)  # valid after the run
    print("%s: %d events, %d states seen while the ranks wrote" % (" ".join(args[:1]), len(events), seen["states"]))
    return events


def short_name(op_name):
    """"allreduce #12 (count 6, float, sum)" -> "allreduce #12"; a send or
    recv names its peer: "send #3 to rank 1"."""
    m = re.match(r"(\S+) #(\d+) \((.*)\)$", op_name)
    if m is None:
        return None
    coll, seq, inside = m.groups()
    peer = re.search(r"(to|from) rank (\d+)$", inside)
    return "%s #%s" % (coll, seq) + (" %s rank %s" % peer.groups() if peer and coll in ("send", "recv") else "")


def check_common(events, label, nranks, expected_ops):
    """What holds for every job: processes, operations, nesting, channels, bytes."""
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    check(names == {r: "rank %d" % r for r in range(nranks)}, "%s: process names %s" % (label, names))
    ops = {r: [e for e in events if e.get("cat") == "operation" and e["pid"] == r] for r in range(nranks)}
    steps = [e for e in events if e.get("cat") == "step"]
    work = [e for e in events if e.get("cat") == "work"]
    for e in events:
        if e.get("ph") == "X":
            check(e["dur"] >= 0 and e["ts"] > 0, "%s: a negative time: %s" % (label, e))
    # Every rank ran the same operations (a collective's description is the same everywhere).
    lists = [sorted(e["name"] for e in ops[r] if short_name(e["name"]).split()[0] not in ("send", "recv"))
             for r in range(nranks)]
    check(all(l == lists[0] for l in lists), "%s: the ranks' operations differ" % label)
    for r in range(nranks):
        check(len(ops[r]) == expected_ops,
              "%s: rank %d has %d operations, not %d" % (label, r, len(ops[r]), expected_ops))
        check(not any(e["args"].get("unfinished") for e in ops[r]),
              "%s: rank %d has an unfinished operation" % (label, r))
    by_op = {}
    for r in range(nranks):
        for e in ops[r]:
            key = (r, short_name(e["name"]))
            check(key not in by_op, "%s: operation %s twice on rank %d" % (label, key[1], r))
            by_op[key] = e
    # Steps lie within their operation; an operation has as many as its schedule.
    count = {}
    for s in steps:
        op = by_op.get((s["pid"], s["args"]["op"]))
        if op is None:
            check(False, "%s: step of an unknown operation: %s" % (label, s))
            continue
        count[(s["pid"], s["args"]["op"])] = count.get((s["pid"], s["args"]["op"]), 0) + 1
        check(op["ts"] - EPS <= s["ts"] and s["ts"] + s["dur"] <= op["ts"] + op["dur"] + EPS,
              "%s: step outside its operation: %s in %s" % (label, s, op))
        check(0 <= s["args"]["wait_us"] <= s["dur"] + EPS, "%s: wait longer than the step: %s" % (label, s))
    for key, op in by_op.items():
        check(count.get(key, 0) == op["args"]["steps"],
              "%s: rank %d %s: %d step events, the schedule has %d" % (label, key[0], key[1], count.get(key, 0),
                                                                       op["args"]["steps"]))
    # A thread's steps, and its operations, follow one another.
    tracks = {}
    for e in steps + [op for r in ops for op in ops[r]]:
        tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    for key, track in tracks.items():
        track.sort(key=lambda e: e["ts"])
        for a, b in zip(track, track[1:]):
            check(b["ts"] >= a["ts"] + a["dur"] - EPS, "%s: overlapping on pid %d tid %d: %s and %s" %
                  (label, key[0], key[1], a["name"], b["name"]))
    # Each step's work is the part after its wait.
    ends = {(s["pid"], s["tid"], round(s["ts"] + s["dur"], 3)) for s in steps}
    check(len(work) == len(steps), "%s: %d work events for %d steps" % (label, len(work), len(steps)))
    check(all((w["pid"], w["tid"], round(w["ts"] + w["dur"], 3)) in ends for w in work),
          "%s: a work event ends where no step does" % label)
    check(all(re.match(r"(recv|reduce|copy|send)(-(reduce|copy|send))* [0-9.]+ (B|KiB|MiB|GiB)( from \d+)?( to \d+)?$",
                       s["name"]) for s in steps), "%s: a step named otherwise" % label)
    # Bytes: what one rank's steps send, another's receive.
    moved = {}
    for s in steps:
        m = moved.setdefault(s["args"]["op"], {"sent": [0] * nranks, "received": [0] * nranks})
        if "send_peer" in s["args"]:
            m["sent"][s["pid"]] += s["args"]["bytes"]
        if "recv_peer" in s["args"]:
            m["received"][s["pid"]] += s["args"]["bytes"]
    for op, m in moved.items():
        if not op.startswith(("send", "recv")):
            check(sum(m["sent"]) == sum(m["received"]), "%s: %s sends %s but receives %s" % (label, op, m["sent"],
                                                                                         m["received"]))
    return ops, moved


def bench_calls(args):
    """Calls of the collective per size that ccl-bench makes: warm-up,
    timed, and one checked call; out of place and in place."""
    w = int(args[args.index("-w") + 1])
    n = int(args[args.index("-n") + 1])
    return 2 * (w + n + 1)


def sizes(args):
    def parse(t):
        return int(t[:-1]) * {"K": 1024, "M": 1 << 20}[t[-1]]
    b, e, f = parse(args[args.index("-b") + 1]), parse(args[args.index("-e") + 1]), int(args[args.index("-f") + 1])
    out = []
    while b <= e:
        out.append(b)
        b *= f
    return out


def abort_rank(rank, uid, path, aborted, results):
    """Rank 0 starts an allreduce that rank 1 never joins and aborts; rank 1
    destroys its communicator once rank 0 is gone."""
    try:
        import nnpccl
        os.environ["NNPCCL_TRACE"] = path
        comm = nnpccl.Communicator(2, uid, rank, timeout=30)
        x = array.array("f", [1.0] * 1024)
        comm.allreduce(x)
        if rank == 0:
            request = comm.iallreduce(x)
            time.sleep(0.2)
            comm.abort()
            del request
            aborted.set()
        else:
            aborted.wait(60)
            try:
                comm.destroy()
            except nnpccl.Error:
                pass  # the peer's abort may be what destroy reports
        results.put((rank, ""))
    except BaseException:
        results.put((rank, traceback.format_exc()))


def check_abort(path):
    import nnpccl
    ctx = mp.get_context("spawn")
    uid = nnpccl.get_unique_id()
    aborted, results = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=abort_rank, args=(r, uid, path, aborted, results)) for r in range(2)]
    for p in procs:
        p.start()
    outcomes = dict(results.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    check(outcomes == {0: "", 1: ""}, "abort: a rank failed: %s" % outcomes)
    with open(path) as f:
        events = json.load(f)
    ops = {r: {e["name"]: e for e in events if e.get("cat") == "operation" and e["pid"] == r} for r in range(2)}
    first, second = "allreduce #0 (count 1024, float, sum)", "allreduce #1 (count 1024, float, sum)"
    check(first in ops[0] and first in ops[1] and not ops[0][first]["args"].get("unfinished"),
          "abort: the allreduce both ranks ran is missing or unfinished: %s" % ops)
    check(second in ops[0] and ops[0][second]["args"].get("unfinished") is True and second not in ops[1],
          "abort: rank 0's last allreduce is not marked unfinished: %s" % ops)
    print("abort: %d events" % len(events))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        check_abort(os.path.join(tmp, "abort.json"))

    with tempfile.TemporaryDirectory() as tmp:
        # Allreduce: per size and placement, the calls, a barrier before the
        # timed ones, and 3 allreduces of one double (the time and the checks).
        args = ["allreduce", "--np", str(NP), "-b", "64K", "-e", "1M", "-f", "4", "-n", "2", "-w", "1"]
        per_size = bench_calls(args)
        events = run_traced(os.path.join(tmp, "allreduce.json"), args)
        expected = len(sizes(args)) * (per_size + 2 * 4)
        ops, moved = check_common(events, "allreduce", NP, expected)
        for size in sizes(args):
            name = "(count %d, float, sum)" % (size // 4)
            for r in range(NP):
                n = sum(1 for e in ops[r] if e["name"].endswith(name))
                check(n == per_size, "allreduce: rank %d ran %d allreduces of %d bytes, not %d" % (r, n, size, per_size))
        ring = [e for e in ops[0] if e["args"]["algorithm"] == "ring" and e["args"]["bytes"] >= 65536]
        check(len(ring) == per_size * len(sizes(args)), "allreduce: %d ring allreduces, the selector's choice" % len(ring))
        for e in ring:
            # A ring allreduce: each rank sends 2(p-1)/p of the buffer; all together 2(p-1) of it.
            m = moved[short_name(e["name"])]
            size = e["args"]["bytes"]
            check(sum(m["sent"]) == 2 * (NP - 1) * size, "allreduce: %s sends %s in all" % (e["name"], m["sent"]))
            check(all(abs(b - 2 * (NP - 1) * size / NP) <= 16 for b in m["sent"]),
                  "allreduce: %s: a rank sends other than 2(p-1)/p of %d: %s" % (e["name"], size, m["sent"]))

        # Broadcast from rank 0: every other rank receives the buffer once.
        args = ["broadcast", "--np", str(NP), "-b", "64K", "-e", "1M", "-f", "4", "-n", "2", "-w", "1"]
        per_size = bench_calls(args)
        events = run_traced(os.path.join(tmp, "broadcast.json"), args)
        ops, moved = check_common(events, "broadcast", NP, len(sizes(args)) * (per_size + 2 * 4))
        casts = [e for e in ops[0] if e["name"].startswith("broadcast")]
        check(len(casts) == per_size * len(sizes(args)), "broadcast: %d broadcasts on rank 0" % len(casts))
        for e in casts:
            m = moved[short_name(e["name"])]
            size = e["args"]["bytes"]
            check(m["received"] == [0] + [size] * (NP - 1), "broadcast: %s receives %s" % (e["name"], m["received"]))
            if e["args"]["algorithm"] == "ring":
                check(m["sent"] == [size] * (NP - 1) + [0], "broadcast: %s (ring) sends %s" % (e["name"], m["sent"]))

        # Sends and receives that run side by side take lanes of their own.
        args = ["sendrecv", "--np", "2", "-b", "1M", "-e", "4M", "-f", "4", "-n", "2", "-w", "1"]
        events = run_traced(os.path.join(tmp, "sendrecv.json"), args)
        # Per size (out of place only): a send and a recv per call, a barrier, 3 allreduces.
        w, n = int(args[args.index("-w") + 1]), int(args[args.index("-n") + 1])
        ops, moved = check_common(events, "sendrecv", 2, len(sizes(args)) * (2 * (w + n + 1) + 1 + 3))
        for r in range(2):
            for e in ops[r]:
                name = short_name(e["name"])
                if name.startswith("send"):
                    k = name.split()[1]
                    back = moved.get("recv %s from rank %d" % (k, r), {"received": [0, 0]})["received"][1 - r]
                    check(moved[name]["sent"][r] == e["args"]["bytes"] == back,
                          "sendrecv: rank %d %s sends %d bytes of %d, rank %d receives %d" %
                          (r, name, moved[name]["sent"][r], e["args"]["bytes"], 1 - r, back))

        # A path that cannot be written fails init, naming the variable and the path.
        bad = os.path.join(tmp, "missing-dir", "trace.json")
        proc = subprocess.run([BENCH, "allreduce", "--np", "2", "-b", "8", "-e", "8", "-n", "1", "-w", "0"],
                              env=dict(os.environ, NNPCCL_TRACE=bad), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=60)
        check(proc.returncode != 0 and ("NNPCCL_TRACE=" + bad) in proc.stderr and "init failed" in proc.stderr,
              "an unwritable NNPCCL_TRACE: exit %d, stderr %r" % (proc.returncode, proc.stderr))
        check(not os.path.exists(os.path.dirname(bad)), "the missing directory was made")

    if failures:
        print("%d failures" % len(failures))
        sys.exit(1)
    print("trace OK")


if __name__ == "__main__":
    main()
