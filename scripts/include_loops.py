#!/usr/bin/env python3
"""The folders' include graph and its loops: every #include "..." between
two source folders (engine/ and service/ split by their subfolders), and the
strongly connected groups of folders (a loop runs through each). The test
include_graph checks the libraries; this looks one level finer, inside them.

Usage: include_loops.py [SOURCE_ROOT]"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder(path):
    parts = path.split("/")
    if parts[0] in ("engine", "service"):
        return parts[0] + "/" + (parts[1] if len(parts) > 2 else "(top)")
    return parts[0]


def strongly_connected(graph):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def main():
    edges = {}
    for top in ("policies", "base", "engine", "kernels", "settings", "sim", "service", "actors", "cli"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if not name.endswith((".hpp", ".cpp", ".cu", ".cuh")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), ROOT).replace(os.sep, "/")
                with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
                    for m in INCLUDE.finditer(f.read()):
                        a, b = folder(rel), folder(m.group(1))
                        if a != b:
                            edges.setdefault(a, {}).setdefault(b, 0)
                            edges[a][b] += 1
    for a in sorted(edges):
        for b in sorted(edges[a]):
            print(f"{a:20} -> {b:20} {edges[a][b]}")
    groups = strongly_connected({a: list(bs) for a, bs in edges.items()})
    print(f"{len(groups)} loop(s) of folders" + "".join(f"\n  {' <-> '.join(g)}" for g in groups))


if __name__ == "__main__":
    main()
