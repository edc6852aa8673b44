#!/usr/bin/env python3
"""Fails on any doctest case that passes without checking anything.

Usage: scripts/check-assertions.py BUILD_DIR [EXECUTABLE_NAME...]

Runs each doctest executable of BUILD_DIR/tests (those that tests/CMakeLists.txt registers: every
<name>_cases.cmake there names one), whole, with doctest's XML reporter, and reads the report. A
case that ran, passed and made no assertion fails the check, unless it recorded a skip
(pinfeed::test::skip_case logs a MESSAGE "skipped: <reason>"). The cases doctest itself left out
(the suite "gpu" where no CUDA device is usable: tests/test_main.cpp) are counted as skipped.
Prints, per executable, the cases run, their assertions and the cases skipped, then every
offending case by name; exits 1 if there is one, or if an executable failed or gave no report.

The allocation-failure sweeps (fault_tests) run with PINFEED_FAULT_POINTS=6 unless it is set:
every case still asserts, in a fraction of the CI sweep's time.
"""
import os
import pathlib
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

SKIP_PREFIX = "skipped: "
TIMEOUT_S = 1800


def executables(build_dir, names):
    tests = build_dir / "tests"
    found = sorted(p.name[: -len("_cases.cmake")] for p in tests.glob("*_cases.cmake"))
    if names:
        missing = [n for n in names if n not in found]
        if missing:
            sys.exit(f"check-assertions: not doctest executables of {tests}: {', '.join(missing)}")
        found = names
    exes = [tests / n for n in found if os.access(tests / n, os.X_OK)]
    if not exes:
        sys.exit(f"check-assertions: no doctest executable under {tests} (build the tests first)")
    return exes


def recorded_skip(case):
    for text in case.iter("Text"):
        if (text.text or "").strip().startswith(SKIP_PREFIX):  # the XML writer indents text
            return True
    return False


def check(exe, out_dir):
    """Runs one executable; returns (summary line, offending case names, problems)."""
    report = out_dir / f"{exe.name}.xml"
    log = out_dir / f"{exe.name}.log"
    env = dict(os.environ)
    env.setdefault("PINFEED_FAULT_POINTS", "6")
    start = time.monotonic()
    with open(log, "wb") as out:
        try:
            rc = subprocess.run([str(exe), "--reporters=xml", f"--out={report}"], cwd=exe.parent, env=env,
                                stdout=out, stderr=subprocess.STDOUT, timeout=TIMEOUT_S).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    seconds = time.monotonic() - start
    problems = []
    if rc not in (0, 77):  # 77: every case it ran was skipped (test_main.cpp)
        tail = log.read_text(errors="replace").splitlines()[-20:]
        problems.append(f"{exe.name} exited {rc} (log {log}):\n    " + "\n    ".join(tail))
    try:
        root = ET.parse(report).getroot()
    except (OSError, ET.ParseError) as e:
        problems.append(f"{exe.name}: no readable XML report ({e})")
        return f"{exe.name}: no report", [], problems
    run = asserts = left_out = self_skipped = 0
    offending = []
    for case in root.iter("TestCase"):
        if case.get("skipped") == "true":
            left_out += 1
            continue
        run += 1
        result = case.find("OverallResultsAsserts")
        if result is None:  # a case that never ended (a crash): the exit status says so
            problems.append(f"{exe.name}: {case.get('name')} has no result")
            continue
        n = int(result.get("successes", 0)) + int(result.get("failures", 0))
        asserts += n
        if recorded_skip(case):
            self_skipped += 1
        elif n == 0 and result.get("test_case_success") == "true":
            offending.append(f"{exe.name}: {case.get('name')} ({case.get('filename')}:{case.get('line')})")
    line = (f"{exe.name}: {run} cases run, {asserts} assertions, {self_skipped} skipped by the case, "
            f"{left_out} left out by doctest ({seconds:.0f} s)")
    return line, offending, problems


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    build_dir = pathlib.Path(sys.argv[1]).resolve()
    exes = executables(build_dir, sys.argv[2:])
    out_dir = build_dir / "assertion-check"
    out_dir.mkdir(exist_ok=True)
    offending, problems = [], []
    for exe in exes:
        line, bad, trouble = check(exe, out_dir)
        print(line, flush=True)
        offending += bad
        problems += trouble
    for p in problems:
        print("check-assertions: " + p)
    if offending:
        print(f"check-assertions: {len(offending)} case(s) passed without a single assertion "
              "(make each check something real, or skip it with pinfeed::test::skip_case):")
        for o in offending:
            print("  " + o)
    if offending or problems:
        return 1
    print(f"check-assertions: every case that passed asserted something (reports under {out_dir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
