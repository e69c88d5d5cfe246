#!/bin/sh
# ccl-sim --trace writes a Chrome trace-event file that parses as JSON and
# holds one complete event per step of the schedules (and one for its work
# after the wait): ranks as processes "rank N", channels as threads
# "channel C", each channel's steps in order and apart, each operation on
# the "operations" thread ending with its last step, and the last step
# ending at the simulated time ccl-sim printed.
# Usage: sim_trace_test.sh path/to/ccl-sim
set -eu
sim=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=0

# check LABEL STEPS CHANNELS RANKS ARGS...: the trace of `ccl-sim ARGS` holds
# STEPS step events on RANKS ranks of CHANNELS channels each.
check() {
    label=$1
    steps=$2
    channels=$3
    ranks=$4
    shift 4
    if ! "$sim" "$@" --trace "$out/trace.json" >"$out/stdout" 2>"$out/stderr"; then
        echo "FAILED: $label: ccl-sim failed:"; cat "$out/stderr"; failed=1; return
    fi
    if /usr/bin/python3 - "$out/trace.json" "$out/stdout" "$steps" "$channels" "$ranks" <<'EOF'
import json, re, sys

path, stdout, steps, channels, ranks = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
with open(path) as f:
    events = json.load(f)
printed = open(stdout).read()

def fail(why):
    print(why)
    sys.exit(1)

def meta(kind):
    return {(e["pid"], e.get("tid"), e["args"]["name"]) for e in events if e["ph"] == "M" and e["name"] == kind}

complete = [e for e in events if e["ph"] == "X" and e["cat"] == "step"]
work = [e for e in events if e["ph"] == "X" and e["cat"] == "work"]
operations = [e for e in events if e["ph"] == "X" and e["cat"] == "operation"]
if len(complete) != steps or len(work) != steps:
    fail(f"{len(complete)} step events and {len(work)} work events, expected {steps}")
if f", {steps} step events" not in printed:
    fail("ccl-sim did not report the step count")
if meta("process_name") != {(r, None, f"rank {r}") for r in range(ranks)}:
    fail(f"process names: {sorted(meta('process_name'))}")
# An operation beside the first (lane k) has its channels on 1000 * (k + 1) + C.
def channel_name(tid):
    return f"channel {tid % 1000}" + (f", lane {tid // 1000}" if tid >= 1000 else "")
channel_names = {t for t in meta("thread_name") if not 1000 <= t[1] < 2000}
if channel_names != {(e["pid"], e["tid"], channel_name(e["tid"])) for e in complete}:
    fail(f"channel names: {sorted(channel_names)}")
if len({(e["pid"], e["tid"]) for e in complete}) != ranks * channels:
    fail(f"steps on {len({(e['pid'], e['tid']) for e in complete})} channels, expected {ranks * channels}")
if {(e["pid"], e["tid"]) for e in operations} - {(r, t) for r in range(ranks) for t in (1000, 1001)}:
    fail(f"operations off their threads: {operations}")
name = re.compile(r"^(recv|reduce|copy|send)(-(reduce|copy|send))* \d+(\.\d)? (B|KiB|MiB|GiB)( from \d+)?( to \d+)?$")
per_channel = {}
for e in complete:
    a = e["args"]
    if not name.match(e["name"]):
        fail(f"event name {e['name']!r}")
    if a["recv"] != (" from " in e["name"]) or a["send"] != (" to " in e["name"]):
        fail(f"{e['name']!r} does not match its args {a}")
    if a["recv"] and f" from {a['recv_peer']}" not in e["name"] or a["send"] and f" to {a['send_peer']}" not in e["name"]:
        fail(f"{e['name']!r}: args {a}")
    if e["dur"] < 0 or e["ts"] < 0 or not 0 <= a["wait_us"] <= e["dur"] + 1e-6 or a["bytes"] <= 0:
        fail(f"negative, empty or out of its step: {e}")
    per_channel.setdefault((e["pid"], e["tid"]), []).append(e)
for key, evs in per_channel.items():
    evs.sort(key=lambda e: e["args"]["step"])
    if [e["args"]["step"] for e in evs] != list(range(len(evs))):
        fail(f"rank {key[0]} channel {key[1]}: steps {[e['args']['step'] for e in evs]}")
    for before, after in zip(evs, evs[1:]):
        if after["ts"] < before["ts"] + before["dur"] - 1e-5:
            fail(f"rank {key[0]} channel {key[1]}: steps overlap: {before} {after}")
end = max(e["ts"] + e["dur"] for e in complete)
if abs(max(e["ts"] + e["dur"] for e in operations) - end) > 1e-5:
    fail("the operations do not end with their last step")
row = [l for l in printed.splitlines() if l and not l.startswith("#")]
time_us = float(row[0].split()[6])
if abs(end - time_us) > 0.01 + 1e-6 * time_us:
    fail(f"the last step ends at {end} us, ccl-sim printed {time_us}")
EOF
    then
        echo "ok: $label"
    else
        echo "FAILED: $label"; failed=1
    fi
}

# Ring allreduce of 64 KiB on nnpt-ring8: the ring both ways, two channels
# per direction on a machine of links (4 channels), one slice each: 2p-1
# steps per channel and rank.
check "ring allreduce, nnpt-ring8" $((8 * 4 * 15)) 4 8 allreduce --topo nnpt-ring8 -b 64K -e 64K --algo ring
# The same on nnpt-hcm8: two rings both ways, two channels each (8
# channels), whose reductions meet on every chip.
check "ring allreduce, nnpt-hcm8" $((8 * 8 * 15)) 8 8 allreduce --topo nnpt-hcm8 -b 256K -e 256K --algo ring
# Direct allreduce of one chunk on nnpt-hcm8: p-1 sends and p folds per rank.
check "direct allreduce, nnpt-hcm8" $((8 * (7 + 8))) 1 8 allreduce --topo nnpt-hcm8 -b 64K -e 64K --algo direct
# sendrecv of 3 chunks on ring:4: a send and a recv per rank, side by side
# as channels 0 and 1, 3 steps each.
check "sendrecv, ring:4" $((4 * 2 * 3)) 2 4 sendrecv --topo ring:4 -b 1536K -e 1536K

exit $failed
