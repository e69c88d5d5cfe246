#!/bin/sh
# NNPCCL_TUNING_FILE end to end: ccl-bench --tune writes one (merging
# collectives), a job prefers its choices (NNPCCL_DEBUG=INFO names them) with
# every value right, a choice that does not apply is left to the model, a
# file for another job size is ignored with a warning, and a missing,
# malformed or oversized file fails init naming the file and what is wrong
# (rank 0 reads it and every rank gets the same verdict, but ccl-bench stops
# the other ranks as soon as one has failed, so only one may print it).
#   tuning_file_test.sh CCL_BENCH
set -u
bench=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=0
fail() {
    echo "FAILED: $1"
    sed 's/^/    /' "$scratch/out"
    failed=1
}
export NNPCCL_SOCKET_IFNAME=lo
unset NNPCCL_ALGO NNPCCL_TOPO NNPCCL_TUNE

file=$scratch/tuning
if "$bench" allreduce --np 3 -b 1K -e 64K -f 8 --tune "$file" --compare 1 -n 3 -w 1 >"$scratch/out" 2>&1 &&
    "$bench" broadcast --np 3 -b 1K -e 64K -f 8 --tune "$file" --compare 1 -n 3 -w 1 >>"$scratch/out" 2>&1 &&
    grep -qx 'nranks 3' "$file" && grep -qx 'topology flat' "$file" &&
    grep -q '^allreduce:[a-z_]*:0-' "$file" && grep -q '^broadcast:[a-z_]*:0-' "$file"; then
    echo "ok: ccl-bench --tune writes and merges"
else
    cat "$file" >>"$scratch/out" 2>/dev/null
    fail "ccl-bench --tune writes and merges"
fi
if NNPCCL_TUNING_FILE=$file "$bench" allreduce --np 3 -b 1K -e 64K -f 8 -n 3 -w 1 >"$scratch/out" 2>&1; then
    echo "ok: a job runs on the file ccl-bench wrote"
else
    fail "a job runs on the file ccl-bench wrote"
fi
if "$bench" allreduce --np 2 -b 8 -e 8 --tune "$file" --compare 1 -n 2 -w 1 >"$scratch/out" 2>&1 ||
    ! grep -q "holds choices for nranks 3, not 2" "$scratch/out"; then
    fail "--tune refuses a file of another job size"
else
    echo "ok: --tune refuses a file of another job size"
fi

# The model picks direct for 8 bytes on 4 ranks; the file prefers
# halving_doubling there, and torus2d (which needs a torus) above 1 KiB.
printf '# by hand\nnranks 4\ntopology flat\nallreduce:halving_doubling:0-1K,torus2d:1K-max\n' >"$file"
if NNPCCL_DEBUG=INFO NNPCCL_TUNING_FILE=$file "$bench" allreduce --np 4 -b 8 -e 64K -f 64 -n 3 -w 1 \
    >"$scratch/out" 2>&1 &&
    grep -q "allreduce of 8 bytes: halving_doubling (NNPCCL_TUNING_FILE's)" "$scratch/out" &&
    grep -q "allreduce of 32768 bytes: [a-z_]*; predicted" "$scratch/out" &&
    ! grep -q "allreduce of 32768 bytes: torus2d" "$scratch/out"; then
    echo "ok: the file's choice where it applies, the model's where it does not"
else
    fail "the file's choice where it applies, the model's where it does not"
fi
if NNPCCL_DEBUG=INFO NNPCCL_TUNING_FILE=$file "$bench" allreduce --np 2 -b 8 -e 8 -n 3 -w 1 >"$scratch/out" 2>&1 &&
    grep -q "was measured for 4 ranks on flat, not 2 on flat: the model chooses" "$scratch/out" &&
    ! grep -q "NNPCCL_TUNING_FILE's)" "$scratch/out"; then
    echo "ok: a file for another job size is ignored, with a warning"
else
    fail "a file for another job size is ignored, with a warning"
fi
if NNPCCL_TUNING_FILE=$scratch/absent "$bench" allreduce --np 2 -b 8 -e 8 >"$scratch/out" 2>&1 ||
    ! grep -q "NNPCCL_TUNING_FILE=$scratch/absent: cannot open it" "$scratch/out"; then
    fail "a missing file fails init, naming it"
else
    echo "ok: a missing file fails init, naming it"
fi
printf 'nranks 2\ntopology flat\nallreduce:ring:0-max\nallreduce ring\n' >"$file"
if NNPCCL_TUNING_FILE=$file "$bench" allreduce --np 2 -b 8 -e 8 >"$scratch/out" 2>&1 ||
    ! grep -q "line 4: 'allreduce ring' is not 'nranks N'" "$scratch/out"; then
    fail "a malformed line fails init, naming the line"
else
    echo "ok: a malformed line fails init, naming the line"
fi
# A wrong path to a large file: refused by size, before any rank reads it.
head -c 40000 /dev/zero | tr '\0' '#' >"$file"
if NNPCCL_TUNING_FILE=$file "$bench" allreduce --np 2 -b 8 -e 8 >"$scratch/out" 2>&1 ||
    ! grep -q "NNPCCL_TUNING_FILE=$file: larger than 32768 bytes" "$scratch/out"; then
    fail "an oversized file fails init, naming its size"
else
    echo "ok: an oversized file fails init, naming its size"
fi
exit $failed
