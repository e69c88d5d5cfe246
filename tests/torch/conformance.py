"""Runs cases of torch's distributed suite (dist_suite.py) for one backend and
world size, one case after another, and records each case's outcome.

  conformance.py --backend nnpccl --world 2 [--cases NAME ...] [--match RE]
                 [--timeout S] [--json FILE] [--require-pass]

The nnpccl_torch module must be importable (PYTHONPATH=build/python). Each
case's processes are killed at --timeout seconds (the suite's own per-case
timeout, DISTRIBUTED_TESTS_DEFAULT_TIMEOUT); the case then fails."""

import argparse
import json
import os
import re
import sys
import tempfile
import time
import unittest


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["gloo", "nnpccl"], required=True)
    parser.add_argument("--world", type=int, choices=[2, 3], required=True)
    parser.add_argument("--cases", nargs="*", default=None, help="case names (test_...); default: all")
    parser.add_argument("--match", default=None, help="only cases whose name matches this regular expression")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per case before it is killed")
    parser.add_argument("--json", default=None, help="write {case: {status, seconds, detail}} here")
    parser.add_argument("--require-pass", action="store_true",
                        help="exit 1 unless every case selected passed or skipped")
    return parser.parse_args()


class RecordingResult(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = {}
        self._started = 0.0

    def startTest(self, test):
        self._started = time.monotonic()
        super().startTest(test)

    def _record(self, test, status, detail=""):
        name = test.id().split(".")[-1]
        # A C++ exception's frames would crowd out its message.
        detail = "\n".join(line for line in detail.splitlines() if not line.lstrip().startswith("frame #"))
        self.outcomes[name] = {"status": status, "seconds": round(time.monotonic() - self._started, 1),
                               "detail": detail[-4000:]}

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", reason)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "passed", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "failed", "unexpected success")


def main():
    args = parse_args()
    temp_dir = tempfile.mkdtemp(prefix="nnpccl-torch-suite-")
    for sub in ("barrier", "test_dir", "init_dir"):
        os.makedirs(os.path.join(temp_dir, sub), exist_ok=True)
    os.environ.update({
        "NNPCCL_SUITE_BACKEND": args.backend,
        "WORLD_SIZE": str(args.world),
        "TEMP_DIR": temp_dir,
        "DISTRIBUTED_TESTS_DEFAULT_TIMEOUT": str(args.timeout),
        "MASTER_ADDR": "127.0.0.1",
        "NNPCCL_SOCKET_IFNAME": "lo",
        "GLOO_SOCKET_IFNAME": "lo",
        # Two cores are shared by every rank of a case.
        "OMP_NUM_THREADS": "1",
    })
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    try:
        import expecttest  # noqa: F401
    except ImportError:
        # Children inherit the path through the environment.
        shim = os.path.join(here, "shim")
        sys.path.insert(0, shim)
        os.environ["PYTHONPATH"] = shim + os.pathsep + os.environ.get("PYTHONPATH", "")
    import dist_suite

    loader = unittest.TestLoader()
    names = loader.getTestCaseNames(dist_suite.TestDistBackendWithSpawn)
    if args.cases:
        unknown = sorted(set(args.cases) - set(names))
        if unknown:
            sys.exit(f"conformance.py: no such case in torch's suite: {', '.join(unknown)}")
        names = [n for n in names if n in args.cases]
    if args.match:
        names = [n for n in names if re.search(args.match, n)]
    suite = unittest.TestSuite(dist_suite.TestDistBackendWithSpawn(n) for n in names)
    runner = unittest.TextTestRunner(resultclass=RecordingResult, verbosity=2, stream=sys.stdout)
    result = runner.run(suite)
    counts = {s: sum(1 for o in result.outcomes.values() if o["status"] == s) for s in ("passed", "skipped", "failed")}
    print(f"{args.backend} on {args.world} ranks: {len(result.outcomes)} run, {counts['passed']} passed, "
          f"{counts['skipped']} skipped, {counts['failed']} failed", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"backend": args.backend, "world": args.world, "torch": dist_suite.torch_version(),
                       "cases": result.outcomes}, f, indent=1, sort_keys=True)
    if args.require_pass and counts["failed"]:
        failed = sorted(n for n, o in result.outcomes.items() if o["status"] == "failed")
        print("failed: " + " ".join(failed), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
