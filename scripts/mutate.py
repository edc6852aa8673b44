#!/usr/bin/env python3
"""A mutation campaign over pinfeed's C++ sources (universalmutator's regexp mutants).

It works on a copy of one commit (--commit, HEAD by default) in build-mutate/COMMIT/ (the checkout
itself is never touched): src/ (the sources), build/ (their Release build with the tests). For each
file it makes every mutant universalmutator makes; then, folder by folder in turn, it takes the
mutants in a seeded random order and for each one:
  1. compiles the objects of the mutated file: a mutant that does not compile is dropped;
  2. compares the objects with the original's: byte-identical ones are dropped (equivalent);
  3. builds the rest of the tree and runs the CTest cases that cover the file (a map beside this
     script, scripts/mutate-map.txt), stopping at the first failure, with a timeout; a mutant the
     narrowest cases miss meets the wider ones of its folder before it counts as survived;
  4. writes a row: the file, line, change, and killed (by which case), survived or timed out.
It stops when --budget mutants have been tested (dropped ones do not count). Rows go to
tests/mutation/COMMIT-seedS.tsv (in the checkout, to be committed) as they are made; a later run
with the same commit and seed, in this session or another, continues where it stopped. --report
prints the per-folder table.

Usage: scripts/mutate.sh [--files GLOB]... [--budget N] [--seed S] [--commit C] [--report]
"""
import argparse
import collections
import glob
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import zlib

sys.modules.setdefault("mutate", sys.modules[__name__])  # one module, run as a script or imported
import mutate_results as results  # noqa: E402 (after the line above)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = SRC = BUILD = RESULTS = ""  # set by main() for the campaign's commit and seed
CHILD = None  # the command running now (its process group is killed when the campaign is stopped)
COLUMNS = ["id", "file", "line", "original", "mutant", "outcome", "by", "seconds"]
# The files that carry the contracts (issue: loader rooms, epoch order, node plan, transforms and
# pipeline source, JPEG window and walker, tar and shard indexes, remote retry and ranges, judge).
DEFAULT_FILES = ["runtime/src/loader/*.cpp", "runtime/src/epoch_order.cpp", "runtime/src/node_plan.cpp",
                 "runtime/src/node_sources.cpp", "loaders/src/transforms/*.cpp", "loaders/src/pipeline_source.cpp",
                 "loaders/src/jpeg_window.cpp", "loaders/src/jpeg_walk.cpp", "loaders/src/tar.cpp",
                 "loaders/src/shard_index.cpp", "loaders/src/remote/retry.cpp", "loaders/src/remote/range_reads.cpp",
                 "doctor/src/rules.cpp"]


def log(msg):
    print("mutate: " + msg, flush=True)


def run(cmd, cwd=None, timeout=None):
    """(exit status, output); 124 when it ran past `timeout` seconds, after which its whole process
    group is killed (a hung test binary under ctest would otherwise spin on)."""
    global CHILD
    p = CHILD = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                                 start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return 124, out or ""


def read_map():
    """[(path prefix, CTest regex)], the longest prefix first."""
    rows = []
    for line in open(os.path.join(ROOT, "scripts", "mutate-map.txt")):
        line = line.split("#", 1)[0].strip()
        if line:
            prefix, regex = line.split(None, 1)
            rows.append((prefix, regex.strip()))
    return sorted(rows, key=lambda r: -len(r[0]))


def tests_for(path, mapping):
    """The regexes that cover `path`, the narrowest first; the whole suite when none does."""
    found = [regex for prefix, regex in mapping if path.startswith(prefix)]
    return found or ["."]


def full_commit(name):
    p = subprocess.run(["git", "-C", ROOT, "rev-parse", "--verify", name + "^{commit}"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("mutate: --commit %s is not a commit of this checkout" % name)
    return p.stdout.strip()


def prepare(commit):
    """The copy of the commit and its build (made once, then reused)."""
    stamp = os.path.join(WORK, "commit")
    if not os.path.exists(stamp):
        os.makedirs(SRC, exist_ok=True)
        archive = subprocess.Popen(["git", "-C", ROOT, "archive", commit], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", SRC], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            sys.exit("mutate: git archive failed")
        open(stamp, "w").write(commit + "\n")
    # The test environment (torchvision, Pillow, moto, the photos) the comparisons look for in the tree.
    venv = os.path.join(SRC, ".venv-test")
    if not os.path.lexists(venv) and os.path.isdir(os.path.join(ROOT, ".venv-test")):
        os.symlink(os.path.join(ROOT, ".venv-test"), venv)
    if not os.path.exists(os.path.join(BUILD, "build.ninja")):
        dlpack = subprocess.run(["bash", os.path.join(ROOT, "scripts", "fetch-dlpack.sh")], capture_output=True, text=True,
                                check=True).stdout.strip()
        rc, out = run(["cmake", "-S", SRC, "-B", BUILD, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_CUDA_ARCHITECTURES=90",
                       "-DPINFEED_DLPACK_INCLUDE_DIR=" + dlpack, "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache",
                       "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"])
        if rc != 0:
            sys.exit("mutate: configuring build-mutate/build failed:\n" + out[-4000:])
    log("building the original (the first time: the whole tree)")
    rc, out = run(["ninja", "-C", BUILD])
    if rc != 0:
        sys.exit("mutate: the original does not build:\n" + out[-4000:])


def objects_of(path):
    """The object files compiled from source `path` (relative to the tree)."""
    rc, out = run(["ninja", "-C", BUILD, "-t", "targets", "all"])
    want = "/" + os.path.basename(path) + ".o"
    objs = []
    for line in out.splitlines():
        target = line.split(":", 1)[0]
        if target.endswith(want) and ".dir/" in target:
            inner = target.split(".dir/", 1)[1][: -len(".o")].replace("__/", "../")  # CMake writes ".." as "__"
            top = target.split("/CMakeFiles/", 1)[0] if "/CMakeFiles/" in target else ""
            if os.path.normpath(os.path.join(top, inner)) == os.path.normpath(path):
                objs.append(target)
    return objs


def make_mutants(path):
    """[(mutant file, line, original line, mutated line)] of source `path`."""
    out_dir = os.path.join(WORK, "mutants", path.replace("/", "_"))
    if not os.path.isdir(out_dir):
        tmp = out_dir + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        mutate = os.path.join(ROOT, ".venv-mutate", "bin", "mutate")
        rc, out = run([mutate, os.path.join(SRC, path), "cpp", "--noCheck", "--mutantDir", tmp], cwd=tmp)
        if rc != 0:
            sys.exit("mutate: universalmutator failed on %s:\n%s" % (path, out[-2000:]))
        os.rename(tmp, out_dir)
    original = open(os.path.join(SRC, path)).read().splitlines()
    mutants = []
    for name in sorted(os.listdir(out_dir), key=lambda n: int(re.search(r"\.mutant\.(\d+)\.", n).group(1))):
        change = results.change_of(original, os.path.join(out_dir, name))
        if change:
            at, before, after = change
            mutants.append((os.path.join(out_dir, name), at + 1, " ".join(before).strip(), " ".join(after).strip()))
    return mutants


def failed_case(out):
    m = re.search(r"Test +#\d+: (\S+) \.*\s*\*+(Failed|Timeout|Exception|Not Run)", out)
    return m.group(1) if m else "?"


def evaluate(path, mutant, objs, regexes, originals, limits):
    """(outcome, by): no-compile, identical, killed (the case), survived, or timeout."""
    src = os.path.join(SRC, path)
    saved = open(src, "rb").read()
    try:
        shutil.copyfile(mutant, src)
        rc, _ = run(["ninja", "-C", BUILD] + objs, timeout=900)
        if rc != 0:
            return "no-compile", ""
        if all(open(os.path.join(BUILD, o), "rb").read() == originals[o] for o in objs):
            return "identical", ""
        rc, _ = run(["ninja", "-C", BUILD], timeout=1800)
        if rc != 0:
            return "no-compile", "link"
        for regex, limit in zip(regexes, limits):  # the narrowest cases first; a survivor meets the wider ones
            cmd = ["ctest", "--test-dir", BUILD, "-R", regex, "-E", r"^(package|python)\.", "--stop-on-failure",
                   "--timeout", str(int(limit)), "-j", "2"]
            rc, out = run(cmd, timeout=limit)
            if rc == 124 or "***Timeout" in out:
                # Once more before it counts: a machine busy with other work can stretch a run
                # past its limit, and a timeout counts as caught.
                rc, out = run(cmd, timeout=limit)
            if rc == 124 or "***Timeout" in out:
                return "timeout", "over %d s twice (the original's run: %d s)" % (limit, (limit - 60) / 2)
            if rc != 0:
                return "killed", failed_case(out)
            if "No tests were found" in out:
                sys.exit("mutate: no CTest case matches %r (scripts/mutate-map.txt)" % regex)
        return "survived", ""
    finally:
        with open(src, "wb") as f:
            f.write(saved)
        run(["ninja", "-C", BUILD] + objs, timeout=900)  # the original objects again (the compiler cache has them)


def restore_sources(commit, files):
    """Every file to mutate as the commit has it (a run stopped hard may have left a mutant), the
    tree rebuilt where one was."""
    restored = False
    for path in files:
        want = subprocess.run(["git", "-C", ROOT, "show", "%s:%s" % (commit, path)], capture_output=True, check=True).stdout
        if open(os.path.join(SRC, path), "rb").read() != want:
            log("restoring %s (a mutant was left in it)" % path)
            with open(os.path.join(SRC, path), "wb") as f:
                f.write(want)
            restored = True
    if restored and run(["ninja", "-C", BUILD])[0] != 0:
        sys.exit("mutate: the original does not build after the restore")


def baseline_seconds(regex):
    """The cases of `regex` on the original, all of them: they must pass; their wall time (kept)."""
    key = os.path.join(WORK, "baseline-%08x" % zlib.crc32(regex.encode()))
    stamp = key + ".s"
    if os.path.exists(stamp) and open(stamp).read().split("\t", 1)[1].strip() == regex:
        return float(open(stamp).read().split("\t", 1)[0])
    log("the original against %s (its time sets each mutant's limit)" % regex)
    start = time.monotonic()
    rc, out = run(["ctest", "--test-dir", BUILD, "-R", regex, "-E", r"^(package|python)\.", "-j", "2"], timeout=7200)
    if rc != 0:
        sys.exit("mutate: the original fails cases of %s, so no mutant could be judged:\n%s" % (regex, out[-3000:]))
    seconds = time.monotonic() - start
    with open(stamp, "w") as f:
        f.write("%.0f\t%s\n" % (seconds, regex))
    return seconds


def read_results(path=None):
    path = path or RESULTS
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write("\t".join(COLUMNS) + "\n")
        return {}
    rows = {}
    with open(path) as f:
        next(f)
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) == len(COLUMNS):
                rows[fields[0]] = dict(zip(COLUMNS, fields))
    return rows


def candidates(files, seed):
    """The mutants in the order they are tried: each folder's in its own seeded order, the folders in turn."""
    by_folder = collections.OrderedDict()
    for path in files:
        muts = [(path, i) + m for i, m in enumerate(make_mutants(path))]
        by_folder.setdefault(os.path.dirname(path), []).extend(muts)
    queues = []
    for folder, muts in by_folder.items():
        random.Random("%s:%s" % (seed, folder)).shuffle(muts)
        queues.append(collections.deque(muts))
    while any(queues):
        for q in queues:
            if q:
                yield q.popleft()


def clean(text):
    return text.replace("\t", " ").replace("\n", " ")[:160]


def stopped(*_):
    """SIGTERM: the running command's group killed; the mutated file is restored as the stack unwinds."""
    if CHILD is not None and CHILD.poll() is None:
        os.killpg(CHILD.pid, signal.SIGKILL)
    sys.exit("mutate: stopped (SIGTERM); the mutated file was restored")


def main():
    # The suites' precompiled headers: without these ccache refuses every file compiled with one.
    os.environ["CCACHE_SLOPPINESS"] = ",".join(filter(None, [os.environ.get("CCACHE_SLOPPINESS"), "pch_defines,time_macros"]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", action="append", help="a glob of sources under the tree (again for more); default: the contracts' files")
    ap.add_argument("--budget", type=int, default=300, help="mutants to test (dropped ones do not count)")
    ap.add_argument("--seed", default="1")
    ap.add_argument("--commit", default="HEAD", help="the commit whose sources are mutated")
    ap.add_argument("--recheck", metavar="BASE", help="retest the survivors of BASE's campaign (same seed) at --commit")
    ap.add_argument("--open-only", action="store_true",
                    help="with --recheck: only the survivors no earlier recheck killed and no file of tests/mutation answers "
                         "(equivalent, gpu_only, hand_checked)")
    ap.add_argument("--report", action="store_true", help="print the campaign's table (with its rechecks) and stop")
    a = ap.parse_args()
    global WORK, SRC, BUILD, RESULTS
    commit = full_commit(a.commit)
    WORK = os.path.join(ROOT, "build-mutate", commit[:12])
    SRC, BUILD = os.path.join(WORK, "src"), os.path.join(WORK, "build")
    base = full_commit(a.recheck) if a.recheck else commit
    campaign_rows = os.path.join(ROOT, "tests", "mutation", "%s-seed%s.tsv" % (base[:12], a.seed))
    RESULTS = campaign_rows if not a.recheck else campaign_rows[:-len(".tsv")] + "-after-%s.tsv" % commit[:12]
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    if a.report:
        results.report(read_results(campaign_rows), results.rechecked(campaign_rows))
        return
    signal.signal(signal.SIGTERM, stopped)
    prepare(commit)
    if a.recheck:
        results.recheck(base, a.seed, read_map(), open_only=a.open_only)
        results.report(read_results(campaign_rows), results.rechecked(campaign_rows))
    else:
        campaign(a)


def campaign(a):
    """Tests mutants of the files until the budget's are tested (the rows already made skipped)."""
    mapping = read_map()
    files = sorted({os.path.relpath(p, SRC) for g in (a.files or DEFAULT_FILES) for p in glob.glob(os.path.join(SRC, g))})
    if not files:
        sys.exit("mutate: no source matches %s" % (a.files or DEFAULT_FILES))
    restore_sources(open(os.path.join(WORK, "commit")).read().strip(), files)
    rows = read_results()
    limits = {}
    for path in files:
        for regex in tests_for(path, mapping):
            if regex not in limits:
                limits[regex] = 2 * baseline_seconds(regex) + 60
    originals, objects = {}, {}
    for path in files:
        objects[path] = objects_of(path)
        if not objects[path]:
            sys.exit("mutate: no object file is compiled from %s" % path)
        for o in objects[path]:
            originals[o] = open(os.path.join(BUILD, o), "rb").read()
    tested = sum(1 for r in rows.values() if r["outcome"] in ("killed", "survived", "timeout"))
    log("%d files; %d mutants tested before this run; budget %d" % (len(files), tested, a.budget))
    for path, index, mutant, line, original, changed in candidates(files, a.seed):
        if tested >= a.budget:
            break
        key = "%s#%d" % (path, index)
        if key in rows:
            continue
        start = time.monotonic()
        regexes = tests_for(path, mapping)
        outcome, by = evaluate(path, mutant, objects[path], regexes, originals, [limits[r] for r in regexes])
        row = [key, path, str(line), clean(original), clean(changed), outcome, by, "%.0f" % (time.monotonic() - start)]
        with open(RESULTS, "a") as f:
            f.write("\t".join(row) + "\n")
        rows[key] = dict(zip(COLUMNS, row))
        if outcome in ("killed", "survived", "timeout"):
            tested += 1
            log("%d/%d %s:%d %s %s" % (tested, a.budget, path, line, outcome, by))
    results.report(rows, results.rechecked(RESULTS))


if __name__ == "__main__":
    main()
