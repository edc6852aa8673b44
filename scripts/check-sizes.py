#!/usr/bin/env python3
"""Lists what outgrows the size limits of pinfeed's sources, measured with universal-ctags:
files over --file lines, functions over --function lines, classes and structs over --class lines.

Usage: scripts/check-sizes.py [--file 450] [--function 60] [--class 300] [--report] PATH...
Exits 1 when something is over a limit (with --report: prints the largest of each kind and exits 0), 77
when universal-ctags is missing.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

SOURCES = (".cpp", ".hpp", ".cu", ".cuh", ".h")

# Files the limits do not hold for: generated or third-party sources that live among pinfeed's own,
# each with the reason (a path relative to the repository root). None does today: generated headers
# (version.hpp, config.hpp) are written to the build tree, and no third-party source is vendored.
EXEMPT = {
}


def exempt(path):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.relpath(os.path.abspath(path), root) in EXEMPT


def files_under(paths):
    for p in paths:
        if os.path.isfile(p):
            if not exempt(p):
                yield p
            continue
        for root, _, names in os.walk(p):
            for n in sorted(names):
                if n.endswith(SOURCES) and not exempt(os.path.join(root, n)):
                    yield os.path.join(root, n)


def tags(path):
    out = subprocess.run(["ctags", "--output-format=json", "--fields=+neK", "--kinds-C++=+p-d", "--language-force=C++",
                          "-o", "-", path], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        t = json.loads(line)
        if "end" in t and "line" in t:
            yield t


def main():
    if shutil.which("ctags") is None:
        print("skipped: universal-ctags is not installed (scripts/install-deps.sh installs it)")
        return 77
    ap = argparse.ArgumentParser()
    ap.add_argument("--file", type=int, default=450)
    ap.add_argument("--function", type=int, default=60)
    ap.add_argument("--class", dest="cls", type=int, default=300)
    ap.add_argument("--report", action="store_true")
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    stale = [f for f in EXEMPT if not os.path.exists(os.path.join(root, f))]
    if stale:
        print(f"EXEMPT names files that do not exist: {stale}")
        return 1
    if a.report:
        for f, why in EXEMPT.items():
            print(f"exempt: {f}: {why}")
    rows = []  # (kind, lines, where)
    for f in files_under(a.paths):
        with open(f, encoding="utf-8", errors="replace") as fh:
            rows.append(("file", sum(1 for _ in fh), f))
        for t in tags(f):
            kind = t.get("kind")
            lines = t["end"] - t["line"] + 1
            name = t.get("scope", "") + ("::" if t.get("scope") else "") + t["name"]
            if kind == "function":
                rows.append(("function", lines, f"{f}:{t['line']} {name}"))
            elif kind in ("class", "struct"):
                rows.append(("class", lines, f"{f}:{t['line']} {name}"))
    limits = {"file": a.file, "function": a.function, "class": a.cls}
    over = [r for r in rows if r[1] > limits[r[0]]]
    for kind in ("file", "function", "class"):
        of_kind = sorted((r for r in rows if r[0] == kind), key=lambda r: -r[1])
        if a.report and of_kind:
            print(f"largest {kind}: {of_kind[0][1]} lines ({of_kind[0][2]}); limit {limits[kind]}")
    for kind, lines, where in sorted(over):
        print(f"over the {kind} limit ({limits[kind]}): {lines} lines: {where}")
    return 0 if a.report or not over else 1


if __name__ == "__main__":
    sys.exit(main())
