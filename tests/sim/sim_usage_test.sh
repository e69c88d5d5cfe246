#!/bin/sh
# ccl-sim's usage errors: each ends with exit status 2 and one line on
# stderr naming what was wrong; --help succeeds and lists the flags.
# Usage: sim_usage_test.sh path/to/ccl-sim
set -u
sim=$1
failed=0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# usage_error LABEL TEXT COMMAND...: exit 2, one line on stderr containing TEXT.
usage_error() {
    label=$1
    text=$2
    shift 2
    "$@" >"$out/stdout" 2>"$out/stderr"
    status=$?
    if [ $status -ne 2 ] || [ "$(wc -l <"$out/stderr")" -ne 1 ] || ! grep -qF -- "$text" "$out/stderr"; then
        echo "FAILED: $label: exit $status, stderr:"; cat "$out/stderr"; failed=1
    else
        echo "ok: $label: $(cat "$out/stderr")"
    fi
}

"$sim" --help >"$out/help" 2>&1
if [ $? -ne 0 ] || ! grep -qF -- "--all-algos" "$out/help" || ! grep -qF -- "--trace" "$out/help" ||
    ! grep -qF -- "--links-csv" "$out/help" || ! grep -qF -- "--fail-chip" "$out/help" ||
    ! grep -qF -- "--fidelity" "$out/help"; then
    echo "FAILED: --help"; cat "$out/help"; failed=1
else
    echo "ok: --help"
fi

usage_error "unknown collective" "unknown collective 'allreduse'" "$sim" allreduse --topo nnpt-ring8
usage_error "no collective" "name a collective" "$sim" --topo nnpt-ring8
usage_error "unknown algorithm" "--algo rign: no algorithm of that name serves allreduce" \
    "$sim" allreduce --topo nnpt-ring8 --algo rign
usage_error "algorithm of another collective" "--algo pairwise: pairwise does not serve allreduce" \
    "$sim" allreduce --topo nnpt-ring8 --algo pairwise
usage_error "algorithm that does not apply" "torus2d does not apply to allreduce on nnpt-ring8" \
    "$sim" allreduce --topo nnpt-ring8 --algo torus2d -b 1M -e 1M
usage_error "unknown topology" "--topo junk: topology 'junk' is neither a preset" "$sim" allreduce --topo junk
usage_error "malformed preset" "torus:XxY or torus:XxYxZ needs positive sizes" "$sim" allreduce --topo torus:0x4
usage_error "flat without ranks" "give the number of ranks with --np N" "$sim" allreduce --topo flat
usage_error "bad size" "12Q is not a size" "$sim" allreduce --topo nnpt-ring8 -b 12Q
usage_error "-e below -b" "-e is smaller than -b" "$sim" allreduce --topo nnpt-ring8 -b 1M -e 1K
usage_error "root out of range" "-r 9 is not a rank of 8" "$sim" broadcast --topo nnpt-ring8 -r 9
usage_error "sendrecv on one rank" "sendrecv needs 2 ranks" "$sim" sendrecv --topo flat --np 1
usage_error "--algo with --all-algos" "excludes" "$sim" allreduce --topo nnpt-ring8 --algo ring --all-algos
usage_error "trace of a sweep" "--trace, --svg, --links-csv and --report show one run" "$sim" allreduce --topo nnpt-ring8 -b 1K -e 1M --trace "$out/t.json"
usage_error "report of a sweep" "--links-csv and --report show one run" "$sim" allreduce --topo nnpt-ring8 -b 1K -e 1M --report
usage_error "--link-gbps 0" "--link-gbps: not a bandwidth in GB/s above 0: 0 " "$sim" allreduce --topo nnpt-ring8 --link-gbps 0
usage_error "--link-gbps text" "--link-gbps: not a bandwidth in GB/s above 0: fast" "$sim" allreduce --topo nnpt-ring8 --link-gbps fast
usage_error "--link-latency negative" "--link-latency: not a latency in us, 0 or more: -1" \
    "$sim" allreduce --topo nnpt-ring8 --link-latency=-1
usage_error "--fail-link malformed" "--fail-link: 3 is not two chips A-B" "$sim" allreduce --topo nnpt-ring8 --fail-link 3
usage_error "--fail-link to itself" "--fail-link: 2-2 is not two chips A-B" "$sim" allreduce --topo nnpt-ring8 --fail-link 2-2
usage_error "--fail-link not cabled" "--fail-link 0-4: chips 0 and 4 are not cabled (chip 0's neighbours: 1, 7)" \
    "$sim" allreduce --topo nnpt-ring8 --fail-link 0-4
usage_error "--fail-link beyond the chips" "--fail-link 0-9: nnpt-ring8 has chips 0-7" \
    "$sim" allreduce --topo nnpt-ring8 --fail-link 0-9
usage_error "--fail-link cutting the job" "cannot run the job" \
    "$sim" allreduce --topo nnpt-ring8 --fail-link 0-1 --fail-link 4-5
usage_error "--fail-chip beyond the chips" "--fail-chip 8: nnpt-ring8 has chips 0-7" \
    "$sim" allreduce --topo nnpt-ring8 --fail-chip 8
usage_error "--fail-chip malformed" "--fail-chip: x is not a chip number" "$sim" allreduce --topo nnpt-ring8 --fail-chip x
usage_error "--fidelity unknown" "unknown fidelity 'exact'" "$sim" allreduce --topo nnpt-ring8 --fidelity exact
usage_error "--credit-bytes without credits" "add --fidelity credits" \
    "$sim" allreduce --topo nnpt-ring8 --credit-bytes 64K
usage_error "--credit-bytes 0" "--credit-bytes 0: a link needs a buffer" \
    "$sim" allreduce --topo nnpt-ring8 --fidelity credits --credit-bytes 0
usage_error "--message-overhead negative" "--message-overhead: not a time in us, 0 or more: -2" \
    "$sim" allreduce --topo nnpt-ring8 --fidelity credits --message-overhead=-2
usage_error "malformed NNPCCL_ALGO" "NNPCCL_ALGO" env NNPCCL_ALGO=allreduce:nosuch "$sim" allreduce --topo nnpt-ring8 -b 1K -e 1K
exit $failed
