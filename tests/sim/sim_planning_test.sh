#!/bin/sh
# ccl-sim as a planning tool, checked as a user would: the per-link table
# adds up to the bytes the call moves, the report's critical path to the
# call's time; a failed cable carries nothing and the call is no faster;
# a failed chip leaves one rank fewer; halving every link's bandwidth
# about doubles a bandwidth-bound call, doubling its latency slows a
# latency-bound one; the credits mode is never faster than the default.
# Usage: sim_planning_test.sh path/to/ccl-sim
set -u
sim=$1
failed=0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

fail() { echo "FAILED: $*"; failed=1; }
ok() { echo "ok: $*"; }
# The time column of the one row of a run (the line that is not a comment).
time_of() { grep -v '^#' "$1" | awk '{print $7}' | tr -d '~'; }
# check LABEL AWK-CONDITION: the condition on the variables given after it.
check() {
    label=$1
    shift
    if awk "BEGIN { exit !($1) }"; then ok "$label"; else fail "$label ($1)"; fi
}

# The ring on nnpt-ring8: every message crosses one link, and the ring
# allreduce sends 2(p-1) times the buffer in all.
size=16777216
"$sim" allreduce --topo nnpt-ring8 -b $size -e $size --algo ring --links-csv "$out/ring.csv" --report \
    >"$out/ring" 2>"$out/err" || { fail "ring8 --links-csv --report: exit $?"; cat "$out/err"; }
rows=$(tail -n +2 "$out/ring.csv" | wc -l)
sum=$(tail -n +2 "$out/ring.csv" | awk -F, '{s += $7} END {printf "%.0f", s}')
[ "$(head -1 "$out/ring.csv" | cut -d, -f1-4)" = "link,from_chip,to_chip,kind" ] || fail "the CSV's header"
check "the CSV has a row per directed link (16 on nnpt-ring8): $rows" "$rows == 16"
check "the CSV's bytes add up to 2(p-1) x $size: $sum" "$sum == 14 * $size"
busiest=$(tail -n +2 "$out/ring.csv" | awk -F, 'BEGIN {m = 0} {if ($9 > m) m = $9} END {print m}')
check "utilisation is a share of the call: busiest $busiest" "$busiest > 0.9 && $busiest <= 1"
t=$(time_of "$out/ring")
path=$(sed -n 's/^# critical path: \([0-9.e+]*\) us.*/\1/p' "$out/ring")
check "the critical path ($path us) spans the call ($t us)" "$path > 0.999 * $t && $path < 1.001 * $t"
grep -q '^# bottleneck links' "$out/ring" && grep -q '^#   link latency' "$out/ring" || fail "the report's lines"
grep -q '^#   chip 0 -> chip 1 (ring+)' "$out/ring" || fail "a bottleneck link named by its chips and direction"

# A failed cable on nnpt-pod32: nothing crosses it, the call is no faster.
base=$("$sim" allreduce --topo nnpt-pod32 -b 16M -e 16M --algo torus2d | time_of /dev/stdin)
"$sim" allreduce --topo nnpt-pod32 -b 16M -e 16M --algo torus2d --fail-link 0-1 --links-csv "$out/cut.csv" \
    >"$out/cut" 2>"$out/err" || { fail "--fail-link: exit $?"; cat "$out/err"; }
cut=$(time_of "$out/cut")
grep -q '^# what if: cable 0-1 down' "$out/cut" || fail "--fail-link says what changed"
carried=$(tail -n +2 "$out/cut.csv" | awk -F, '($2 == 0 && $3 == 1) || ($2 == 1 && $3 == 0) {s += $7} END {print s + 0}')
check "the failed cable carries nothing: $carried B" "$carried == 0"
check "the call with a cable down ($cut us) is no faster than whole ($base us)" "$cut >= $base"

# A failed chip: the job runs on the other 31.
"$sim" allreduce --topo nnpt-pod32 -b 1M -e 1M --fail-chip 5 >"$out/chip" 2>"$out/err" ||
    { fail "--fail-chip: exit $?"; cat "$out/err"; }
grep -q 'nnpt-pod32, 31 ranks' "$out/chip" && grep -q 'chip 5 gone' "$out/chip" ||
    fail "--fail-chip runs 31 ranks and says so"
[ -n "$(time_of "$out/chip")" ] && ok "--fail-chip: $(time_of "$out/chip") us" || fail "--fail-chip: no time"

# Every link at half its bandwidth: a bandwidth-bound call takes about twice as long.
full=$("$sim" allreduce --topo nnpt-pod32 -b 64M -e 64M --algo ring | time_of /dev/stdin)
half=$("$sim" allreduce --topo nnpt-pod32 -b 64M -e 64M --algo ring --link-gbps 28 | time_of /dev/stdin)
check "--link-gbps 28: $half us against $full at 56" "$half > 1.9 * $full && $half < 2.05 * $full"
# Twice the latency: a latency-bound call slows by most of that.
one=$("$sim" allreduce --topo torus:4x4 -b 4K -e 4K --algo torus2d | time_of /dev/stdin)
two=$("$sim" allreduce --topo torus:4x4 -b 4K -e 4K --algo torus2d --link-latency 2 | time_of /dev/stdin)
check "--link-latency 2: $two us against $one at 1" "$two > 1.6 * $one && $two <= 2 * $one"

# The credits mode is never faster, every algorithm, small to large.
for algo in ring torus2d direct halving_doubling double_binary_tree; do
    for bytes in 4K 1M 16M; do
        d=$("$sim" allreduce --topo torus:4x4 -b $bytes -e $bytes --algo $algo | time_of /dev/stdin)
        c=$("$sim" allreduce --topo torus:4x4 -b $bytes -e $bytes --algo $algo --fidelity credits | time_of /dev/stdin)
        awk "BEGIN { exit !($c >= $d) }" || fail "credits faster than the default: $algo $bytes: $c < $d"
    done
done
ok "--fidelity credits is never faster (5 algorithms x 3 sizes on torus:4x4)"
"$sim" allreduce --topo torus:4x4 -b 1M -e 1M --fidelity credits --credit-bytes 4K --message-overhead 2 >"$out/fid" &&
    grep -q 'fidelity credits: 4096 B of buffer per link, 2 us per message' "$out/fid" ||
    fail "--credit-bytes and --message-overhead are taken and shown"
exit $failed
