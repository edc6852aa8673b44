#!/usr/bin/env python3
"""The GPU suites set device memory up only through tests/gpu_setup.hpp.

Usage: gpu_setup_lint.py TESTS_DIR

A bare cudaMemset, or a cudaMemcpy from the host (cudaMemcpyHostToDevice or cudaMemcpyDefault), runs
on the legacy default stream and may return before the device has done it; a kernel a case then
runs on a non-blocking stream does not wait for it. test::upload and test::fill_device finish on the
device before they return. Lists every bare call (file:line) and exits 1 if there is one.
"""
import pathlib
import re
import sys

CALL = re.compile(r"\b(cudaMemset|cudaMemcpy)\s*\(")


def call_text(text, start):
    """The call's text from its name to its closing parenthesis."""
    depth = 0
    for i in range(text.index("(", start), len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[start : i + 1]
    return text[start:]


def bare_calls(path):
    text = path.read_text(errors="replace")
    for m in CALL.finditer(text):
        call = call_text(text, m.start())
        if m.group(1) == "cudaMemcpy" and not re.search(r"cudaMemcpy(HostToDevice|Default)\b", call):
            continue  # device to host: read after the case has waited for its work
        yield text.count("\n", 0, m.start()) + 1, " ".join(call.split())


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    tests = pathlib.Path(sys.argv[1])
    sources = sorted(p for p in tests.rglob("*") if p.suffix in (".cu", ".cuh") or
                     (p.suffix in (".cpp", ".hpp") and "gpu" in p.name and p.name != "gpu_setup.hpp"))
    found = [(p, line, call) for p in sources for line, call in bare_calls(p)]
    for p, line, call in found:
        print(f"{p.relative_to(tests)}:{line}: {call} (use test::upload / test::fill_device: tests/gpu_setup.hpp)")
    if found:
        return 1
    print(f"gpu-setup lint: {len(sources)} GPU test sources, no bare set-up copy or fill on the legacy stream")
    return 0


if __name__ == "__main__":
    sys.exit(main())
