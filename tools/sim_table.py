"""ccl-sim --all-algos' table, read once for the tools that use it
(sim-validate, sim-plot): algorithm names from its header, then per size
`size count`, per algorithm `time busbw model` (or `n/a` where it does not
apply, `failed` where it could not be simulated), the bound's time and
busbw, the model's choice and the fastest simulated. A time ending in ~ was
extrapolated (--max-hops); a model ending in ! is more than 10% off.
"""
import sys
from collections import namedtuple

Cell = namedtuple("Cell", "time busbw model extrapolated")


class Row:
    def __init__(self, size):
        self.size = size
        self.cells = {}  # algorithm -> Cell
        self.bound_busbw = 0.0
        self.choice = None
        self.fastest = None


def parse(text, tool, what):
    """(the algorithms that apply somewhere, rows); exits naming `tool` and
    `what` (the run) on a cell ccl-sim could not simulate or a missing table."""
    algorithms, rows = None, []
    for line in text.splitlines():
        tokens = line.split()
        if line.startswith("#") and "count" in tokens and "bound" in tokens:
            algorithms = tokens[tokens.index("count") + 1:tokens.index("bound")]
            continue
        if line.startswith("#") or not tokens:
            continue
        if algorithms is None:
            sys.exit(f"{tool}: {what}: no table header in ccl-sim's output:\n{text}")
        row, at = Row(int(tokens[0])), 2
        for name in algorithms:
            if tokens[at] == "failed":
                sys.exit(f"{tool}: {what}: ccl-sim could not simulate {name} at {row.size} bytes:\n{text}")
            if tokens[at] == "n/a":
                at += 1
                continue
            time, busbw, model = tokens[at:at + 3]
            row.cells[name] = Cell(float(time.strip("~")), float(busbw), float(model.strip("!~")), "~" in time)
            at += 3
        row.bound_busbw = float(tokens[at + 1])
        row.choice, row.fastest = tokens[at + 2], tokens[at + 3]
        rows.append(row)
    if algorithms is None or not rows:
        sys.exit(f"{tool}: {what}: no rows in ccl-sim's output:\n{text}")
    return [a for a in algorithms if any(a in r.cells for r in rows)], rows
