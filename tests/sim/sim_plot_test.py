#!/usr/bin/python3
"""tools/sim-plot against ccl-sim: the table has a row per size and a
column per algorithm that applies, the best column names the fastest
simulated, the SVG parses and holds a line per algorithm and the bound;
extrapolated calls are read too;
a machine ccl-sim does not know ends in an error that says so.
Usage: sim_plot_test.py SOURCE_ROOT BUILD_ROOT"""
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

source, build = sys.argv[1], sys.argv[2]
tool = os.path.join(source, "tools/sim-plot")
failures = []

with tempfile.TemporaryDirectory() as tmp:
    svg_path = os.path.join(tmp, "ring8.svg")
    done = subprocess.run([tool, "allreduce", "--topo", "nnpt-ring8", "-b", "1K", "-e", "1M", "-f", "32",
                           "--build", build, "--svg", svg_path], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"FAILED: sim-plot exited {done.returncode}: {done.stderr}")
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "size" not in line]
    sizes = [row.split("|")[1].strip() for row in rows]
    if sizes != ["1 KiB", "32 KiB", "1 MiB"]:
        failures.append(f"table rows are {sizes}, want 1 KiB, 32 KiB, 1 MiB")
    head = next(line for line in done.stdout.splitlines() if line.startswith("| size"))
    algorithms = [c.strip() for c in head.split("|")[2:-3]]
    for expected in ("ring", "double_binary_tree", "halving_doubling", "direct"):
        if expected not in algorithms:
            failures.append(f"column {expected} missing from {algorithms}")
    for row in rows:
        cells = [c.strip() for c in row.split("|")[1:-1]]
        busbw = dict(zip(algorithms, (float(c) for c in cells[1:1 + len(algorithms)])))
        best = cells[1 + len(algorithms)]
        if best not in busbw or busbw[best] != max(busbw.values()):
            failures.append(f"row {cells[0]}: best is {best}, busbw {busbw}")
    svg = ET.parse(svg_path).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    lines = svg.findall(f"{ns}polyline")
    if len(lines) != len(algorithms):
        failures.append(f"{len(lines)} lines drawn for {len(algorithms)} algorithms")
    if not any("bound" in (t.text or "") for t in svg.findall(f"{ns}text")):
        failures.append("the plot has no bound line")

    # A call too large to simulate message by message is extrapolated and
    # marked (~): the table still has its figures.
    done = subprocess.run([tool, "allreduce", "--topo", "nnpt-ring8", "-b", "64M", "-e", "64M", "-f", "2",
                           "--build", build, "--", "--max-hops", "1K"], capture_output=True, text=True)
    if done.returncode != 0 or "| 64 MiB |" not in done.stdout:
        failures.append(f"an extrapolated call: exit {done.returncode}, {done.stdout!r} {done.stderr!r}")

    done = subprocess.run([tool, "allreduce", "--topo", "no-such-machine", "--build", build],
                          capture_output=True, text=True)
    if done.returncode == 0 or "no-such-machine" not in done.stderr:
        failures.append(f"an unknown machine: exit {done.returncode}, stderr {done.stderr!r}")

for failure in failures:
    print("FAILED:", failure)
print("ok" if not failures else f"{len(failures)} failures")
sys.exit(1 if failures else 0)
