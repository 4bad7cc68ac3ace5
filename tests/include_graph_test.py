#!/usr/bin/env python3
"""The include graph is the library graph: every #include "..." of a source
file names a file of its own library or of one the table below lets it use,
and the libraries form no loop.

One row per library: its folders and the libraries it may include (the
libraries of meson.build; cli/ is the troupe binary, examples/ out-of-tree
policies). A folder belongs to its most specific row. Besides the table,
only engine/cuda/ (the dlopen'd CUDA side, with its host-side plans) of the
backends includes kernels/.

Usage: include_graph_test.py SOURCE_ROOT. Prints each include that breaks
the table, and any loop in the table itself, and exits 1; else prints the
library edges it found, with their counts."""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCES = (".hpp", ".cpp", ".cu", ".cuh", ".h")

# library: (its folders, the libraries it may include)
LIBRARIES = {
    "policies": (["policies/"], []),
    "base": (["base/"], []),
    "settings": (["settings/"], []),
    "core": (["engine/core/"], ["base", "policies"]),
    "formats": (["engine/formats/"], ["base"]),
    "text": (["engine/tokenizer/", "engine/template/"], ["base", "core", "formats"]),
    "grammar": (["engine/grammar/"], ["base", "core", "formats", "text"]),
    "model": (["engine/model/"], ["base", "core", "formats", "text"]),
    "kernels": (["kernels/"], ["base"]),
    "backends": (["engine/", "engine/cpu/", "engine/cuda/", "engine/sampling/"],
                 ["base", "core", "formats", "text", "grammar", "model", "policies", "kernels", "install_paths"]),
    "make_model": (["engine/make_model/"], ["base", "core", "formats", "text", "model"]),
    "sim": (["sim/"], ["base", "core", "policies", "settings"]),
    "service": (["service/"], ["base", "core", "formats", "text", "grammar", "model", "backends", "policies",
                               "settings"]),
    "actors": (["actors/"], ["base", "core", "formats", "text", "grammar", "model", "backends", "policies",
                             "settings", "service"]),
    "cli": (["cli/"], ["*"]),
    "examples": (["examples/"], ["policies/api"]),
    "install_paths": (["install_paths.hpp"], []),
}
# The one folder of a library allowed a dependency its siblings are not.
ONLY_FROM = {"kernels": "engine/cuda/"}
FOLDERS = sorted(((f, lib) for lib, (fs, _) in LIBRARIES.items() for f in fs), key=lambda x: -len(x[0]))


def library_of(path):
    """The library a path (a file, or an #include's name) belongs to, or None."""
    for folder, lib in FOLDERS:
        if not path.startswith(folder):
            continue
        # engine/ alone holds its own files only: a subfolder of it is a library of its own.
        if folder == "engine/" and "/" in path[len(folder):]:
            return None
        return lib
    return None


def loops(graph):
    """Each loop of a graph {node: [node]}, as a list of nodes (depth-first)."""
    found, state = [], {}

    def visit(node, path):
        state[node] = 1
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                found.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node, [node])
    return found


def allowed(src_lib, src_path, inc, inc_lib):
    if inc_lib == src_lib:
        return True
    deps = LIBRARIES[src_lib][1]
    if "*" in deps:
        return True
    if src_lib == "examples":
        return any(inc.startswith(d) for d in deps)
    if inc_lib in ONLY_FROM and not src_path.startswith(ONLY_FROM[inc_lib]):
        return False
    return inc_lib in deps


def main():
    table = {lib: [d for d in deps if d in LIBRARIES] for lib, (_, deps) in LIBRARIES.items()}
    bad = [f"the table has a loop: {' -> '.join(loop)}" for loop in loops(table)]
    edges = {}
    for top in ("policies", "base", "engine", "kernels", "settings", "sim", "service", "actors", "cli", "examples"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for name in sorted(files):
                if not name.endswith(SOURCES):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), ROOT).replace(os.sep, "/")
                src_lib = library_of(rel)
                if src_lib is None:
                    bad.append(f"{rel}: in no library of the table")
                    continue
                with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
                    text = f.read()
                for m in INCLUDE.finditer(text):
                    inc = m.group(1)
                    line = text.count("\n", 0, m.start()) + 1
                    inc_lib = library_of(inc)
                    if inc_lib is None:
                        bad.append(f"{rel}:{line}: includes {inc}, in no library of the table")
                        continue
                    if not allowed(src_lib, rel, inc, inc_lib):
                        bad.append(f"{rel}:{line}: {src_lib} includes {inc} ({inc_lib}), which it may not")
                    edges[(src_lib, inc_lib)] = edges.get((src_lib, inc_lib), 0) + 1
    actual = {}
    for (a, b) in edges:
        if a != b:
            actual.setdefault(a, []).append(b)
    bad += [f"the includes loop: {' -> '.join(loop)}" for loop in loops(actual)]
    for line in bad:
        print(line)
    if bad:
        print(f"{len(bad)} problems with the library graph")
        return 1
    for (src, dst), n in sorted(edges.items()):
        print(f"{src:12} -> {dst:14} {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
