#!/bin/sh
# The command-line tools' usage errors: a bad value, an unknown flag and an
# unknown collective each end with exit status 2 (1 is a failed run) and one
# line on stderr naming what was wrong; --help succeeds and lists the flags.
# A peer bench asked for a collective its library lacks exits 3 instead
# (tools/compare-peers leaves it out of the table).
# Usage: cli_usage_test.sh path/to/ccl-bench path/to/ccl-topo [path/to/gloo-bench]
set -u
bench=$1
topo=$2
gloo=${3:-}
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

# help LABEL FLAG COMMAND...: exit 0, and the help (stdout or stderr) names FLAG.
help() {
    label=$1
    flag=$2
    shift 2
    "$@" >"$out/help" 2>&1
    status=$?
    if [ $status -ne 0 ] || ! grep -qF -- "$flag" "$out/help"; then
        echo "FAILED: $label: exit $status"; cat "$out/help"; failed=1
    else
        echo "ok: $label"
    fi
}

help "ccl-bench --help" "--warmup_iters" "$bench" --help
usage_error "ccl-bench bad size" "12Q" "$bench" allreduce --np 2 -b 12Q
usage_error "ccl-bench unknown flag" "--frobnicate" "$bench" allreduce --np 2 --frobnicate
usage_error "ccl-bench unknown collective" "unknown collective 'allreduse'" "$bench" allreduse --np 2
usage_error "ccl-bench unknown datatype" "unknown datatype 'int7'" "$bench" allreduce --np 2 -d int7
usage_error "ccl-bench bad count" "--iters: 0 is not a whole number >= 1" "$bench" allreduce --np 2 -n 0
usage_error "ccl-bench bad transport" "tcp" "$bench" allreduce --np 2 --transport tcp
usage_error "ccl-bench missing value" "--maxbytes" "$bench" allreduce --np 2 -e
usage_error "ccl-bench two collectives" "broadcast" "$bench" allreduce broadcast --np 2
usage_error "ccl-bench no collective" "name a collective" "$bench" --np 2
usage_error "ccl-bench -e below -b" "-e is smaller than -b" "$bench" allreduce --np 2 -b 1M -e 1K

help "ccl-topo --help" "--icl-latency" "$topo" --help
usage_error "ccl-topo bad size" "12Q" "$topo" --size 12Q
usage_error "ccl-topo unknown flag" "--frobnicate" "$topo" --frobnicate
usage_error "ccl-topo --dot with --json" "--json" "$topo" --dot --json
usage_error "ccl-topo value on a flag" "dot was given" "$topo" --dot=1

if [ -n "$gloo" ]; then
    help "gloo-bench --help" "--store" "$gloo" --help
    usage_error "gloo-bench bad size" "12Q" "$gloo" allreduce -b 12Q
    usage_error "gloo-bench unknown flag" "--frobnicate" "$gloo" allreduce --frobnicate
    usage_error "gloo-bench unknown collective" "unknown collective: allreduse" "$gloo" allreduse
    "$gloo" reduce_scatter --np 2 >"$out/stdout" 2>"$out/stderr"
    status=$?
    if [ $status -ne 3 ] || ! grep -qF "has no reduce_scatter" "$out/stderr"; then
        echo "FAILED: gloo-bench reduce_scatter: exit $status, stderr:"; cat "$out/stderr"; failed=1
    else
        echo "ok: gloo-bench reduce_scatter: $(cat "$out/stderr")"
    fi
fi
exit $failed
