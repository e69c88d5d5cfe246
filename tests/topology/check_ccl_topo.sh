#!/bin/sh
# ccl-topo as a user checks it: counts for nnpt-hcm8 and nnpt-pod32, a
# valid SVG, the JSON round trip, and exit status 2 with one line for a
# malformed file or a bad flag.  Usage: check_ccl_topo.sh path/to/ccl-topo
set -eu
topo=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$topo" --topo nnpt-hcm8)
echo "$out" | grep -q "chips: 8," || fail "hcm8: 8 chips"
echo "$out" | grep -q "links: 16 bidirectional" || fail "hcm8: 16 bidirectional links"
echo "$out" | grep -Eq "rings: [2-9] edge-disjoint Hamiltonian rings" || fail "hcm8: 2 edge-disjoint rings"
echo "$out" | grep -q "^host " || fail "host summary"

out=$("$topo" --no-host --topo nnpt-pod32 --size 64M)
echo "$out" | grep -q "torus: 8x4" || fail "pod32: 8x4 torus"
echo "$out" | grep -q "chips: 32," || fail "pod32: 32 chips"
echo "$out" | grep -q "links: 64 bidirectional" || fail "pod32: 64 links"
echo "$out" | grep -q "lower bound for 67108864 bytes" || fail "pod32: --size"

"$topo" --no-host --topo nnpt-pod32 --np 6 --svg "$scratch/pod.svg" >/dev/null
head -c 200 "$scratch/pod.svg" | grep -q "<svg" || fail "svg: no <svg>"
tail -c 20 "$scratch/pod.svg" | grep -q "</svg>" || fail "svg: not closed"
if command -v xmllint >/dev/null 2>&1; then
    xmllint --noout "$scratch/pod.svg" || fail "svg: not well-formed XML"
fi

# A 3D torus: its z-planes side by side, each labelled, z links as arcs
# (quadratic paths) between neighbouring planes and its wrap-around dashed.
"$topo" --no-host --topo torus:4x4x4 --svg "$scratch/t3.svg" >/dev/null
[ "$(grep -c '>z = [0-3]</text>' "$scratch/t3.svg")" -eq 4 ] || fail "3D svg: four labelled z-planes"
[ "$(grep -c '<path d="M[0-9. ]*Q' "$scratch/t3.svg")" -ge 48 ] || fail "3D svg: 48 z links between neighbouring planes as arcs"
grep -q "4x4x4" "$scratch/t3.svg" || fail "3D svg: the legend names three dimensions"
if command -v xmllint >/dev/null 2>&1; then
    xmllint --noout "$scratch/t3.svg" || fail "3D svg: not well-formed XML"
fi
"$topo" --no-host --topo nnpt-pod32 --svg "$scratch/pod2.svg" >/dev/null
grep -q '>z = ' "$scratch/pod2.svg" && fail "2D svg: no z-planes"

"$topo" --topo nnpt-hcm8 --json >"$scratch/hcm8.json"
"$topo" --topo "$scratch/hcm8.json" --json >"$scratch/again.json"
cmp -s "$scratch/hcm8.json" "$scratch/again.json" || fail "json round trip"
"$topo" --topo "$scratch/hcm8.json" --no-host | grep -q "2 edge-disjoint Hamiltonian rings" || fail "json reload rings"
"$topo" --topo nnpt-hcm8 --dot | grep -q "^graph " || fail "dot"

printf '{"chips": 4,\n "links": [{"from": 0, "to": 7}]}\n' >"$scratch/bad.json"
status=0
"$topo" --topo "$scratch/bad.json" >"$scratch/out" 2>"$scratch/err" || status=$?
[ "$status" -eq 2 ] || fail "malformed file: exit status $status, not 2"
[ "$(wc -l <"$scratch/err")" -eq 1 ] || fail "malformed file: not one line"
grep -q "bad.json:2:30: links\[0\].to" "$scratch/err" || fail "malformed file: field and position: $(cat "$scratch/err")"

status=0
"$topo" --frobnicate 2>"$scratch/err" >/dev/null || status=$?
[ "$status" -eq 2 ] && [ "$(wc -l <"$scratch/err")" -eq 1 ] || fail "bad flag"
status=0
"$topo" --topo nnpt-hcm8 --np 9 2>"$scratch/err" >/dev/null || status=$?
[ "$status" -eq 2 ] && grep -q "9 ranks" "$scratch/err" || fail "too many ranks"
echo "ccl-topo: all checks passed"
