#!/bin/sh
# Compiles the C smoke program against the build tree through its
# uninstalled pkg-config file, then installs the build into a scratch prefix
# and compiles the smoke program and the training example against it the
# way a user would: the installed header, `pkg-config --cflags --libs
# nnpccl`, and the installed shared library at run time.
set -eu
build_dir=$1
source_dir=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# First the build tree, as a program built against it without installing
# would take it: pkg-config prefers nnpccl-uninstalled.pc, whose flags must
# name include/ and the directory where libnnpccl.so is built.
uninstalled() { PKG_CONFIG_PATH="$build_dir/meson-uninstalled" PKG_CONFIG_LIBDIR= pkg-config "$@" nnpccl; }
built_libdir=$(uninstalled --variable=libdir)
test -f "$built_libdir/libnnpccl.so"
test -f "$(uninstalled --variable=includedir)/nnpccl.h"
# shellcheck disable=SC2046
cc -std=c99 -Wall -Wextra -Werror -pedantic "$source_dir/tests/c_api/allreduce_smoke.c" -o "$scratch/smoke-uninstalled" \
    $(uninstalled --cflags --libs)
LD_LIBRARY_PATH="$built_libdir" "$scratch/smoke-uninstalled"
meson install -C "$build_dir" --destdir "$scratch" --quiet >/dev/null
prefix=$(meson introspect "$build_dir" --buildoptions | python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"][0])')
libdir=$(meson introspect "$build_dir" --buildoptions | python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="libdir"][0])')
root="$scratch$prefix"
pcdir="$root/$libdir/pkgconfig"
test -f "$root/include/nnpccl.h"
test -f "$pcdir/nnpccl.pc"
# The .pc names the final prefix; point it at the scratch copy. Only that
# directory is searched: building against the shared library needs no other
# package's .pc (libfabric's or hwloc's development files may be missing).
flags=$(PKG_CONFIG_LIBDIR="$pcdir" PKG_CONFIG_PATH= pkg-config --define-variable=prefix="$root" --cflags --libs nnpccl)
# shellcheck disable=SC2086
cc -std=c99 -Wall -Wextra -Werror -pedantic "$source_dir/tests/c_api/allreduce_smoke.c" -o "$scratch/smoke" $flags
LD_LIBRARY_PATH="$root/$libdir" "$scratch/smoke"
# The training example, as its users would build it outside this tree
# (where zlib's and CLI11's headers are installed, as tools/install-deps
# does), and two ranks of it run against the installed library.
example="$source_dir/examples/dist_mlp"
if [ -f /usr/include/zlib.h ] && [ -f /usr/include/CLI/CLI.hpp ]; then
    # shellcheck disable=SC2086
    c++ -std=c++17 -O2 -Wall -Wextra -Werror "$example/dist_mlp.cpp" "$example/data.cpp" "$example/model.cpp" \
        "$example/backend_nnpccl.cpp" -o "$scratch/dist_mlp" $flags -lz
    LD_LIBRARY_PATH="$root/$libdir" "$scratch/dist_mlp" --np 2 --steps 20 --synthetic --check >/dev/null
elif [ "${CI:-}" = true ]; then
    echo "FAIL: zlib's or CLI11's headers are missing; CI=true builds the training example (tools/install-deps installs them)" >&2
    exit 1
fi
# The PyTorch module, where built, lands where its Python reads modules
# (for prefix /usr/local, that Python's own site directory) and imports
# from there against the installed library.
module=$(find "$scratch" -name 'nnpccl_torch.*.so')
if [ -n "$module" ]; then
    python=$(meson introspect "$build_dir" --buildoptions | python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="torch_python"][0])')
    if [ "$prefix" = /usr/local ]; then
        test "$(dirname "$module")" = "$scratch$("$python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')"
    fi
    LD_LIBRARY_PATH="$root/$libdir" PYTHONPATH="$(dirname "$module")" "$python" -c \
        'import nnpccl_torch, torch.distributed as dist; assert dist.Backend("nnpccl") == "nnpccl"'
fi
# The Python package likewise, loading the installed library by the path it
# was given at install time (here moved under the scratch root, so through
# NNPCCL_LIBRARY).
package=$(find "$scratch" -path '*/nnpccl/__init__.py')
if [ -n "$package" ]; then
    python=$(meson introspect "$build_dir" --buildoptions | python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="torch_python"][0])')
    test -f "$(dirname "$package")/_install.py"
    grep -q "LIBRARY = \"$prefix/$libdir/libnnpccl.so.0\"" "$(dirname "$package")/_install.py"
    NNPCCL_LIBRARY="$root/$libdir/libnnpccl.so.0" PYTHONPATH="$(dirname "$(dirname "$package")")" "$python" -c \
        'import nnpccl; assert nnpccl.version() >= 100; assert len(nnpccl.get_unique_id()) == 128'
fi
