#!/bin/sh
# Every collective ccl-bench knows, on 8 local ranks: on a 2-core machine
# that is 4 ranks a core, so ranks are descheduled in the middle of a
# schedule, spin nothing (NNPCCL_SPIN_US is 0 when ranks outnumber cores)
# and sleep on their peers; 8 is also where halving-doubling takes 3 rounds
# and a binary tree has inner ranks of two children. For each collective,
# all checked bit for bit by ccl-bench (-c 1):
#   - the selector's choice over powers of two from 8 B to 4 MiB (empty
#     blocks, one chunk, several chunks of the default 512 KiB pipeline);
#   - sizes that are no power of two (blocks of odd length, partial chunks)
#     with another datatype and op, and root 5 for the rooted collectives;
#   - every algorithm that serves it, forced, where there is a choice.
# The last two cut the pipeline into 64 KiB chunks, so that blocks of a few
# hundred KiB already take many chunks and a last, partial one.
# Any wrong value (#wrong), write past the output (Out of bounds values),
# failed call or missing row fails the test.
set -u
bench=$1
failed=0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The collectives come from ccl-bench itself, so one added later is covered.
"$bench" no_such_collective >/dev/null 2>"$out/usage"
collectives=$(sed -n "s/.*unknown collective 'no_such_collective' (\([a-z_, ]*\)).*/\1/p" "$out/usage" | tr -d ,)
for c in allreduce reduce_scatter allgather broadcast reduce gather scatter alltoall sendrecv; do
    case " $collectives " in *" $c "*) ;; *) echo "FAILED: ccl-bench does not list $c:"; cat "$out/usage"; exit 1 ;; esac
done

sizes() { # $1 min, $2 max, $3 factor: how many rows the sweep prints
    awk -v b="$1" -v e="$2" -v f="$3" 'BEGIN {for (s = b; s <= e; s *= f) n++; print n}'
}

run() { # $1: label, $2: rows expected, $3: NNPCCL_CHUNK_SIZE or "default", then ccl-bench's arguments
    label=$1
    rows=$2
    chunk=$3
    shift 3
    # Timings mean nothing here: each size runs once out of place and once
    # in place, and once more of each to check.
    if [ "$chunk" = default ]; then
        (unset NNPCCL_CHUNK_SIZE; exec "$bench" "$@" --np 8 -c 1 -n 1 -w 0) >"$out/run" 2>"$out/err"
    else
        env NNPCCL_CHUNK_SIZE="$chunk" "$bench" "$@" --np 8 -c 1 -n 1 -w 0 >"$out/run" 2>"$out/err"
    fi
    status=$?
    if [ $status -ne 0 ] || ! grep -q "^# ccl-bench [a-z_]*: nnpccl [^,]*, 8 ranks\$" "$out/run" ||
        ! grep -q "Out of bounds values : 0 OK" "$out/run" ||
        ! awk -v rows="$rows" '$1 ~ /^[0-9]+$/ {n++; if ($9 != 0 || ($13 != 0 && $13 != "N/A")) bad = 1}
            END {exit bad || n != rows}' "$out/run"; then
        echo "FAILED: $label (exit $status): ccl-bench $*"; cat "$out/run" "$out/err"; failed=1
    else
        echo "ok: $label"
    fi
}

# Datatypes and ops taken in turn, one per collective: the check's inputs
# make every reduction order exact, so each combination is bit-exact.
set -- "int8 prod" "bfloat16 sum" "half max" "int64 min" "double avg" "uint8 sum" "int32 avg" "uint64 max" "float prod"
"$bench" --list-algos >"$out/algos" || { echo "FAILED: --list-algos"; exit 1; }
for c in $collectives; do
    run "$c, the selector's choice, float sum, 8 B to 4 MiB" "$(sizes 8 4194304 4)" default "$c" -b 8 -e 4M -f 4
    [ $# -gt 0 ] || set -- "float sum"
    dtype=${1% *}
    op=${1#* }
    shift
    root_label=
    case $c in broadcast | reduce | gather | scatter) root_label=", root 5" ;; esac
    run "$c, $dtype $op, 36 B to 2 MiB by 7x, 64 KiB chunks$root_label" "$(sizes 36 2097152 7)" 64K \
        "$c" -b 36 -e 2M -f 7 -d "$dtype" -o "$op" -r 5
    served=$c
    [ "$c" = sendrecv ] && served=send
    algos=$(awk -v c="$served" '$2 == "serves:" {name = $1; $1 = ""; $2 = ""; gsub(/,/, " ")
                                    if ((" " $0 " ") ~ (" " c " ")) serves = 1; else serves = 0}
                                $1 == "applies:" && serves && $2 == "always" {print name}' "$out/algos")
    [ "$(echo "$algos" | wc -w)" -gt 1 ] || continue
    for algo in $algos; do
        run "$c, --algo $algo, 100 B to 1 MiB by 9x, 64 KiB chunks" "$(sizes 100 1048576 9)" 64K \
            "$c" --algo "$algo" -b 100 -e 1M -f 9
    done
done
exit $failed
