#!/usr/bin/env python3
"""The include graph is the library graph: every #include "..." of a source
folder names a folder of its own library or of one it links (meson.build).

    policies/     libtroupe_policies  standard C++ only
    engine/core/  libtroupe_core      + policies/ (the mechanisms, the foundation types)
    settings/     libtroupe_settings  its own (the TOML reader; toml++)
    sim/          libtroupe_sim       + engine/core/, policies/, settings/
    kernels/      libtroupe_cuda      + engine/core/ (dtype)
    engine/       libtroupe_engine    + engine/core/, policies/
    engine/cuda/  libtroupe_cuda (+ its host-side plans in libtroupe_engine): + engine/, kernels/
    service/      libtroupe_service   + engine/, policies/, settings/ (no CAF, no Beast)
    actors/       libtroupe_actors    + engine/, policies/, settings/, service/
    cli/          troupe              anything
    examples/     out-of-tree policies: policies/api/ alone

Usage: include_graph_test.py SOURCE_ROOT. Prints each include that breaks the
direction and exits 1; else prints the edges it checked."""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

# The most specific folder first: a file belongs to the first prefix it starts with.
ALLOWED = [
    ("policies/", ["policies/"]),
    ("engine/core/", ["engine/core/", "policies/"]),
    ("engine/cuda/", ["engine/", "policies/", "kernels/"]),
    ("engine/", ["engine/", "policies/", "install_paths.hpp"]),
    ("kernels/", ["kernels/", "engine/core/"]),
    ("settings/", ["settings/"]),
    ("sim/", ["sim/", "engine/core/", "policies/", "settings/"]),
    ("service/", ["service/", "engine/", "policies/", "settings/"]),
    ("actors/", ["actors/", "engine/", "policies/", "settings/", "service/"]),
    ("cli/", [""]),
    ("examples/", ["policies/api/"]),
]
SOURCES = (".hpp", ".cpp", ".cu", ".cuh", ".h")


def folder_of(path):
    for prefix, allowed in ALLOWED:
        if path.startswith(prefix):
            return prefix, allowed
    return None, None


def main():
    bad, edges = [], {}
    for top in ("policies", "engine", "kernels", "settings", "sim", "service", "actors", "cli", "examples"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for name in sorted(files):
                if not name.endswith(SOURCES):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), ROOT).replace(os.sep, "/")
                prefix, allowed = folder_of(rel)
                with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
                    text = f.read()
                for m in INCLUDE.finditer(text):
                    inc = m.group(1)
                    line = text.count("\n", 0, m.start()) + 1
                    if not any(inc.startswith(a) for a in allowed):
                        bad.append(f"{rel}:{line}: includes {inc}, outside {prefix}'s libraries ({', '.join(allowed)})")
                    target, _ = folder_of(inc)
                    edges.setdefault((prefix, target or inc), 0)
                    edges[(prefix, target or inc)] += 1
    for line in bad:
        print(line)
    if bad:
        print(f"{len(bad)} includes against the library graph")
        return 1
    for (src, dst), n in sorted(edges.items(), key=lambda e: (e[0][0], str(e[0][1]))):
        print(f"{src:14} -> {dst:14} {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
