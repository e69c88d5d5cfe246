#!/bin/sh
# The ABI boundary: libnnpccl.so exports exactly the functions its public
# headers declare (NNPCCL_API), and nothing else: no C++ internals, no
# libstdc++ template instances.
#   abi_test.sh LIBNNPCCL.so INCLUDE-DIR
set -u
lib=$1
include=$2
exported=$(mktemp)
declared=$(mktemp)
trap 'rm -f "$exported" "$declared"' EXIT
nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u >"$exported"
sed -n 's/^NNPCCL_API [^(]*[ *]\(nnpccl_[a-z0-9_]*\)(.*/\1/p' "$include"/nnpccl.h "$include"/nnpccl_inspect.h |
    sort -u >"$declared"
failed=0
if [ ! -s "$declared" ]; then
    echo "FAILED: found no NNPCCL_API declarations in $include"
    failed=1
fi
strays=$(grep -v '^nnpccl_' "$exported")
if [ -n "$strays" ]; then
    echo "FAILED: $lib exports symbols that are not nnpccl_*:"
    echo "$strays" | head -20
    failed=1
fi
missing=$(comm -23 "$declared" "$exported")
if [ -n "$missing" ]; then
    echo "FAILED: declared in the public headers but not exported:"
    echo "$missing"
    failed=1
fi
undeclared=$(comm -13 "$declared" "$exported")
if [ -n "$undeclared" ]; then
    echo "FAILED: exported but declared in no public header:"
    echo "$undeclared"
    failed=1
fi
[ $failed = 0 ] && echo "ok: $(wc -l <"$exported") symbols exported, each declared NNPCCL_API in the public headers"
exit $failed
