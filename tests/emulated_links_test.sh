#!/bin/sh
# Link emulation end to end: ccl-bench on 8 ranks with NNPCCL_EMULATE_LINKS=1
# on a simulated NNP-T machine must stay bit-exact, and no call may take less
# time than the emulated links allow: the bus bytes at a chip's injection
# bandwidth (its ICL ports of 56 GB/s each way), with time dilated by
# NNPCCL_EMULATE_SCALE. That bound is the one ccl-bench --explain prints,
# and it is checked here against the ports' figures as well.
#
# Only the lower bound is asserted: a slow or busy host makes calls slower,
# never faster, than the links allow. For the check to mean anything, the
# bound must lie well above what the same run takes without emulation, or
# an emulation left out of the path would pass unnoticed; so the run is
# first timed without it, and the scale is chosen to put the bound at 4x
# or more above that.
set -u
bench=$1
failed=0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
sweep="-b 1M -e 4M -f 4"
rows=2

# Table rows as "size out-of-place-time in-place-time", after checking
# that the run went right: exit 0, 8 ranks, no wrong or stray value.
row_times() { # $1: label, $2: output file, $3: exit status
    if [ "$3" -ne 0 ] || ! grep -q "^# ccl-bench [a-z_]*: nnpccl [^,]*, 8 ranks\$" "$2" ||
        ! grep -q "Out of bounds values : 0 OK" "$2" ||
        ! awk -v rows=$rows '$1 ~ /^[0-9]+$/ {n++; if ($9 != 0 || $13 != 0) bad = 1} END {exit bad || n != rows}' "$2"; then
        echo "FAILED: $1 (exit $3)" >&2; cat "$2" >&2
        return 1
    fi
    awk '$1 ~ /^[0-9]+$/ {print $1, $6, $10}' "$2"
}

# $1: collective, $2: preset, $3: ICL ports per chip, $4: the collective's
# bus bytes per byte of size, times n (allreduce 2(n-1), allgather n-1).
check() {
    coll=$1
    topo=$2
    ports=$3
    bus=$4
    label="$coll on $topo"
    # shellcheck disable=SC2086
    "$bench" "$coll" --explain --topo "$topo" --np 8 $sweep >"$out/explain" 2>&1 || {
        echo "FAILED: $label: --explain"; cat "$out/explain"; failed=1; return
    }
    # The bound is the last time column; each size's row ends with it,
    # its busbw and the choice.
    awk '$1 ~ /^[0-9]+$/ {print $1, $(NF - 2)}' "$out/explain" >"$out/bound"
    if ! awk -v ports="$ports" -v bus="$bus" -v rows=$rows '
        {n++; expect = $1 * bus / 8 / (ports * 56e3)   # us: bytes / (GB/s x 1e3)
         if ($2 < expect * 0.99 || $2 > expect * 1.01) {print "bound of", $1, "B:", $2, "us, the ports give", expect; bad = 1}}
        END {exit bad || n != rows}' "$out/bound"; then
        echo "FAILED: $label: --explain's bound is not the bus bytes at $ports x 56 GB/s"; cat "$out/explain"; failed=1
        return
    fi

    # shellcheck disable=SC2086
    "$bench" "$coll" --topo "$topo" --np 8 $sweep -n 3 -w 1 -c 1 >"$out/plain" 2>&1
    row_times "$label without emulation" "$out/plain" $? >"$out/plain.t" || { failed=1; return; }
    scale=$(awk 'NR == FNR {bound[$1] = $2; next}
        {t = $2 > $3 ? $2 : $3; s = 4 * t / bound[$1]; if (s > scale) scale = s}
        END {scale = int(scale) + 1; print scale < 1000 ? 1000 : scale}' "$out/bound" "$out/plain.t")

    # shellcheck disable=SC2086
    NNPCCL_DEBUG=INFO NNPCCL_EMULATE_LINKS=1 NNPCCL_EMULATE_SCALE=$scale \
        "$bench" "$coll" --topo "$topo" --np 8 $sweep -n 3 -w 1 -c 1 >"$out/emulated" 2>"$out/emulated.err"
    row_times "$label with emulated links at scale $scale" "$out/emulated" $? >"$out/emulated.t" || {
        cat "$out/emulated.err"; failed=1; return
    }
    # Every rank's log says its traffic goes through the emulation.
    if [ "$(grep -c "link emulation over shm: .* scale $scale," "$out/emulated.err")" -ne 8 ]; then
        echo "FAILED: $label: not every rank logged link emulation at scale $scale"; cat "$out/emulated.err"; failed=1
        return
    fi
    # Timer skew between ranks after the barrier is the only slack: 5%.
    if awk -v scale="$scale" 'NR == FNR {bound[$1] = $2 * scale; next}
        FILENAME == ARGV[2] {plain[$1] = $2 " and " $3; next}
        {printf "  %9d B: bound %.0f us, emulated %.0f and %.0f us (without emulation %s us)\n",
                $1, bound[$1], $2, $3, plain[$1]
         if ($2 < 0.95 * bound[$1] || $3 < 0.95 * bound[$1]) bad = 1}
        END {exit !bad}' "$out/bound" "$out/plain.t" "$out/emulated.t"; then
        echo "FAILED: $label at scale $scale: a call took less time than the emulated links allow"
        cat "$out/emulated"; failed=1
    else
        echo "ok: $label, bit-exact, no call faster than its links at scale $scale"
    fi
}

check allreduce nnpt-ring8 2 14
check allgather nnpt-hcm8 4 7
exit $failed
