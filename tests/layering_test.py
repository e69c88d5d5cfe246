#!/usr/bin/python3
"""The folders are layers (docs/design.md, "Layers"): each may include
headers of the layers below it and of none above or beside it. The meson
build gives each layer's library only those include folders, so most wrong
includes do not compile; this check covers what the build cannot see (a
header-only include that happens to resolve through a client's wider
include path) and keeps the drawing in design.md true.

Usage: layering_test.py SOURCE_ROOT
"""
import os
import re
import sys

# What each folder may include, besides itself. tests/ may include anything.
ALLOWED = {
    "common": {"include"},
    "topology": {"common", "include"},
    "algorithms": {"topology", "common", "include"},
    "transports": {"common", "include"},
    "src": {"algorithms", "topology", "transports", "common", "include"},
    # Clients: tools and bindings over the public API; the planning tools
    # also read the model's layers, and the tools share tools/common.
    "sim": {"algorithms", "topology", "common", "include", "tools"},
    "tools": {"algorithms", "topology", "common", "include"},
    "bench": {"common", "include", "tools", "tests"},
    "examples": {"include"},
    "python": {"include"},
}
# bench/ may use tests/support (the exact-sum inputs and the local launcher)
# and nothing else of tests/.
BENCH_TESTS_ALLOWED = "tests/support/"
SOURCE_SUFFIXES = (".h", ".hpp", ".c", ".cpp")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def source_files(root):
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")]
        for name in names:
            if name.endswith(SOURCE_SUFFIXES):
                yield os.path.relpath(os.path.join(folder, name), root)


def main():
    root = sys.argv[1]
    files = sorted(source_files(root))
    headers = {}
    problems = []
    for path in files:
        if path.endswith((".h", ".hpp")):
            headers.setdefault(os.path.basename(path), []).append(path)
    # Includes name headers without a folder, resolved through each layer's
    # include folders: two headers of one name would make that ambiguous.
    for name, paths in sorted(headers.items()):
        if len(paths) > 1:
            problems.append(f"header name {name} is used twice: {', '.join(paths)}")
    checked = 0
    for path in files:
        layer = path.split("/")[0]
        if layer not in ALLOWED:
            continue
        with open(os.path.join(root, path), errors="replace") as source:
            for number, line in enumerate(source, 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                name = os.path.basename(match.group(1))
                candidates = headers.get(name)
                if not candidates:
                    continue  # a system or generated header
                target = candidates[0]
                target_layer = target.split("/")[0]
                checked += 1
                if target_layer == layer or target_layer in ALLOWED[layer]:
                    if target_layer == "tests" and not target.startswith(BENCH_TESTS_ALLOWED):
                        problems.append(f"{path}:{number}: includes {target}; bench/ may use only {BENCH_TESTS_ALLOWED}")
                    continue
                problems.append(f"{path}:{number}: {layer}/ includes {target}, but {layer}/ may use only "
                                f"{', '.join(sorted(ALLOWED[layer]))} (docs/design.md, \"Layers\")")
    # A layer's meson.build builds its own folder's files: one that names
    # another folder's sources or headers ("../tools/x.cpp") hides a
    # dependency the drawing does not show.
    for folder in sorted(ALLOWED):
        build_file = os.path.join(root, folder, "meson.build")
        if not os.path.exists(build_file):
            continue
        with open(build_file) as build:
            for number, line in enumerate(build, 1):
                if "'../" in line.split("#")[0]:
                    problems.append(f"{folder}/meson.build:{number}: reaches into another folder: {line.strip()}")
    if checked == 0:
        problems.append("no include was checked: is SOURCE_ROOT the repository?")
    for problem in problems:
        print(problem)
    print(f"layering: {checked} includes checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
