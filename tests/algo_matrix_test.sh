#!/bin/sh
# Every algorithm the registry lists, forced with NNPCCL_ALGO for every
# collective of the C API it serves, on 4 ranks of the flat topology, over
# shared memory and over libfabric: ccl-bench's bit-exact check over sizes
# from 8 B to 2 MiB, and rank 0's INFO log must show the forced algorithm
# ran. Over libfabric the chunk is 256 KiB, so blocks take several messages
# and the provider sends them straight out of the caller's buffers (in
# place, which must never overwrite what a send still reads), and the
# largest go as split messages whose payload a storing step receives
# straight into the caller's buffer. Algorithms that do not apply
# on flat (torus2d) must fail with a message saying so; an unknown --algo
# is a usage error (exit 2). Last, ccl-bench --compare runs them all at once.
# ALGO_MATRIX_TRANSPORTS narrows the transports (default: shm ofi socket).
set -u
bench=$1
failed=0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
api_collectives="allreduce reduce_scatter allgather broadcast reduce gather scatter alltoall send recv"

# --list-algos: "NAME  serves:  c1, c2" then "applies: ..." per algorithm.
# p2p's condition (the peer is another rank) holds for every send and recv
# of ccl-bench's exchange, and swing's (not across hosts) for ranks of one
# host, so they must run on flat like the unconditional ones.
"$bench" --list-algos >"$out/list" || { echo "FAILED: --list-algos"; exit 1; }
pairs=$(awk '$2 == "serves:" {name = $1; $1 = ""; $2 = ""; gsub(/,/, ""); serves[name] = $0}
             $1 == "applies:" {print name, ($2 == "always" || name == "p2p" || name == "swing" ? "always" : "conditional"), serves[name]}' "$out/list")
[ -n "$pairs" ] || { echo "FAILED: --list-algos lists nothing"; cat "$out/list"; exit 1; }

for transport in ${ALGO_MATRIX_TRANSPORTS:-shm ofi socket}; do
chunk=
[ $transport != shm ] && chunk=256K
echo "$pairs" | while read -r algo applies collectives; do
    for c in $collectives; do
        case " $api_collectives " in *" $c "*) ;; *) continue ;; esac
        label="NNPCCL_ALGO=$c:$algo over $transport"
        # Sends and receives run as ccl-bench's ring exchange (no in-place columns).
        run=$c
        case $c in send | recv) run=sendrecv ;; esac
        NNPCCL_DEBUG=INFO NNPCCL_ALGO="$c:$algo" NNPCCL_CHUNK_SIZE=$chunk "$bench" "$run" --np 4 \
            --transport $transport -b 8 -e 2M -f 8 -c 1 -n 2 -w 1 >"$out/run" 2>"$out/err"
        status=$?
        if [ "$applies" = always ]; then
            if [ $status -ne 0 ] || ! grep -q "Out of bounds values : 0 OK" "$out/run" ||
                awk '$1 ~ /^[0-9]+$/ && ($9 != 0 || ($13 != 0 && $13 != "N/A")) {bad = 1} END {exit !bad}' "$out/run" ||
                ! grep -q "$c of [0-9]* bytes: $algo (forced by NNPCCL_ALGO)" "$out/err"; then
                echo "FAILED: $label (exit $status)"; cat "$out/run" "$out/err"; failed=1
            else
                echo "ok: $label"
            fi
        elif [ $status -eq 0 ]; then
            # Conditional algorithms do not apply on flat; the call must say why.
            echo "FAILED: $label ran on flat"; failed=1
        elif ! grep -q "does not apply" "$out/err"; then
            echo "FAILED: $label failed without saying it does not apply"; cat "$out/err"; failed=1
        else
            echo "ok: $label refused on flat"
        fi
    done
    [ $failed -eq 0 ] || exit 1
done || failed=1
done

# --compare: every algorithm serving the collective on a communicator of
# its own, taking turns, checked bit for bit; torus2d does not apply on flat
# and says n/a; the choice is one of the columns.
"$bench" allreduce --compare 2 --np 3 -b 8 -e 1M -f 32 -n 2 -w 1 -c 1 >"$out/run" 2>&1
status=$?
if [ $status -ne 0 ] || ! grep -q "Out of bounds values : 0 OK" "$out/run" ||
    ! awk '/^# +size/ {for (i = 2; i <= NF; i++) column[$i] = i - 1; next}
        $1 ~ /^[0-9]+$/ {rows++
            if ($(column["torus2d"]) != "n/a" || $(column["ring"]) !~ /^[0-9.]+$/ || !($(column["choice"]) in column) ||
                $(column["#wrong"]) != 0) bad = 1}
        END {exit bad || rows != 4}' "$out/run"; then
    echo "FAILED: ccl-bench allreduce --compare (exit $status)"; cat "$out/run"; failed=1
else
    echo "ok: ccl-bench allreduce --compare"
fi
if "$bench" allreduce --compare 2 --algo ring --np 2 >"$out/run" 2>&1 || ! grep -q "takes no --algo" "$out/run"; then
    echo "FAILED: --compare with --algo is not a usage error"; cat "$out/run"; failed=1
fi

"$bench" allreduce --algo no_such_algorithm --np 4 >"$out/run" 2>&1
status=$?
if [ $status -ne 2 ] || ! grep -q "unknown algorithm 'no_such_algorithm'" "$out/run"; then
    echo "FAILED: --algo no_such_algorithm (exit $status)"; cat "$out/run"; failed=1
else
    echo "ok: --algo no_such_algorithm is a usage error"
fi
exit $failed
