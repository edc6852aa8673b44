"""The results side of scripts/mutate.py: --recheck (a campaign's survivors tested again at a later
commit), the equivalent and moved survivors (tests/mutation/equivalent.tsv, moved.tsv), and
--report (the table by folder). It works on mutate.py's globals (the commit's copy and build)."""
import collections
import difflib
import glob
import os
import re
import shutil
import subprocess
import sys
import time

import mutate as m


def change_of(original, mutant_file):
    """(first line index, original lines, mutated lines) of the one change `mutant_file` makes to `original`."""
    mutated = open(mutant_file).read().splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, original, mutated, autojunk=False).get_opcodes():
        if tag != "equal":
            return i1, original[i1:i2], mutated[j1:j2]
    return None


def base_mutants(base, base_work, path):
    """The folder of the base campaign's mutants of `path` (made again, as universalmutator made
    them, where this machine has none: build-mutate/ is not kept between machines)."""
    folder = os.path.join(base_work, "mutants", path.replace("/", "_"))
    if not os.path.isdir(folder):
        source = os.path.join(base_work, "src", path)
        if not os.path.exists(source):
            os.makedirs(os.path.dirname(source), exist_ok=True)
            with open(source, "w") as f:
                f.write(subprocess.run(["git", "-C", m.ROOT, "show", "%s:%s" % (base, path)], capture_output=True, text=True,
                                       check=True).stdout)
        tmp = folder + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        rc, out = m.run([os.path.join(m.ROOT, ".venv-mutate", "bin", "mutate"), source, "cpp", "--noCheck", "--mutantDir", tmp], cwd=tmp)
        if rc != 0:
            sys.exit("mutate: universalmutator failed on %s:\n%s" % (path, out[-2000:]))
        os.rename(tmp, folder)
    return folder


def moved_lines():
    """{id: (the line now, the same slip made in it, the file it is in now or "")}: survivors whose
    line a later change rewrote (tests/mutation/moved.tsv; a fourth column where the line moved to
    a header the survivor's file compiles)."""
    path = os.path.join(m.ROOT, "tests", "mutation", "moved.tsv")
    moved = {}
    for line in open(path) if os.path.exists(path) else []:
        if line.strip() and not line.startswith("#"):
            fields = line.rstrip("\n").split("\t") + [""]
            moved[fields[0]] = (fields[1], fields[2], fields[3])
    return moved


def recheck(base, seed, mapping, open_only=False):
    """The base campaign's survivors, each applied again to this commit's sources (the same change to
    the same lines, found nearest their old place) and tested with its cases; rows go to
    tests/mutation/BASE-seedS-after-COMMIT.tsv. A survivor whose lines a later change rewrote is made
    again from tests/mutation/moved.tsv (the same slip in the new line), or else is "changed".
    open_only: leave out the survivors already answered (killed by an earlier recheck, or named in
    equivalent.tsv, gpu_only.tsv or hand_checked.tsv)."""
    base_work = os.path.join(m.ROOT, "build-mutate", base[:12])
    base_file = os.path.join(m.ROOT, "tests", "mutation", "%s-seed%s.tsv" % (base[:12], seed))
    base_rows = m.read_results(base_file)
    survivors = [r for r in base_rows.values() if r["outcome"] == "survived"]
    if open_only:
        earlier = rechecked(base_file)
        answered = set(notes("equivalent")) | set(notes("gpu_only")) | set(notes("hand_checked"))
        answered |= {i for i, r in earlier.items() if r["outcome"] in ("killed", "timeout")}
        survivors = [r for r in survivors if r["id"] not in answered]
        m.log("recheck: %d survivors not yet answered" % len(survivors))
    done = m.read_results(m.RESULTS)
    moved = moved_lines()
    m.restore_sources(open(os.path.join(m.WORK, "commit")).read().strip(), sorted({r["file"] for r in survivors}))
    for r in survivors:
        if r["id"] in done:
            continue
        path, index = r["file"], int(r["id"].rsplit("#", 1)[1])
        old = subprocess.run(["git", "-C", m.ROOT, "show", "%s:%s" % (base, path)], capture_output=True, text=True,
                             check=True).stdout.splitlines()
        folder = base_mutants(base, base_work, path)
        names = sorted(os.listdir(folder), key=lambda n: int(re.search(r"\.mutant\.(\d+)\.", n).group(1)))
        changes = [c for c in (change_of(old, os.path.join(folder, n)) for n in names) if c]
        at, before, after = changes[index]
        target = path  # the file the lines are in now
        now = open(os.path.join(m.SRC, target)).read().splitlines()
        places = [j for j in range(len(now) - len(before) + 1) if now[j:j + len(before)] == before]
        if not places and r["id"] in moved:  # the line was rewritten: the same slip in its new form
            before, after, target = [moved[r["id"]][0]], [moved[r["id"]][1]], moved[r["id"]][2] or path
            now = open(os.path.join(m.SRC, target)).read().splitlines()
            places = [j for j, text in enumerate(now) if text == before[0]]
        start = time.monotonic()
        if not places:
            outcome, by = "changed", "the mutated lines are no longer in the file"
        else:
            j = min(places, key=lambda j: abs(j - at))
            mutant = os.path.join(m.WORK, "recheck.cpp")
            with open(mutant, "w") as f:
                f.write("\n".join(now[:j] + after + now[j + len(before):]) + "\n")
            objs = m.objects_of(path)
            if not objs:
                sys.exit("mutate: no object file is compiled from %s" % path)
            originals = {o: open(os.path.join(m.BUILD, o), "rb").read() for o in objs}
            regexes = m.tests_for(path, mapping)
            outcome, by = m.evaluate(target, mutant, objs, regexes, originals, [2 * m.baseline_seconds(x) + 60 for x in regexes])
        row = [r["id"], path, r["line"], r["original"], r["mutant"], outcome, by, "%.0f" % (time.monotonic() - start)]
        with open(m.RESULTS, "a") as f:
            f.write("\t".join(row) + "\n")
        m.log("recheck %s:%s %s %s" % (path, r["line"], outcome, by))


def rechecked(campaign_rows):
    """The rows of every recheck of a campaign (later commits' files last), by id."""
    def depth(path):  # how far the recheck's commit is from the root: later commits last
        commit = path.rsplit("-after-", 1)[1][:-len(".tsv")]
        p = subprocess.run(["git", "-C", m.ROOT, "rev-list", "--count", commit], capture_output=True, text=True)
        return int(p.stdout.strip() or 0)

    out = {}
    for path in sorted(glob.glob(campaign_rows[:-len(".tsv")] + "-after-*.tsv"), key=depth):
        out.update(m.read_results(path))
    return out


def notes(name):
    """{id: why} from tests/mutation/NAME.tsv (id, then a tab, then the reason)."""
    path = os.path.join(m.ROOT, "tests", "mutation", name + ".tsv")
    if not os.path.exists(path):
        return {}
    rows = (line.rstrip("\n").split("\t", 1) for line in open(path) if line.strip() and not line.startswith("#"))
    return {r[0]: r[1] for r in rows if len(r) == 2}


def report(rows, after):
    """The per-folder table (markdown): mutants tried, dropped (no compile, identical objects), tested,
    killed before, survived before, equivalent (tests/mutation/equivalent.tsv), reached only with a
    CUDA device (gpu_only.tsv: the CPU suites cannot run them; the gpu case that covers each is
    named there), killed after the new tests, and the kill rate after over the rest. A hang counts
    as killed (its time limit catches it), and so does a mutant whose recheck no longer links (a
    test calls what it removed). A survivor the recheck cannot judge (its line rewritten past
    moved.tsv, or caught only under a sanitizer by a fuzz target) counts as killed after where
    tests/mutation/hand_checked.tsv names the case that fails with it applied by hand."""
    same, gpu, hand = notes("equivalent"), notes("gpu_only"), notes("hand_checked")
    per = collections.OrderedDict()
    for r in rows.values():
        c = per.setdefault(os.path.dirname(r["file"]), collections.Counter())
        c[r["outcome"]] += 1
        if r["outcome"] == "survived":
            row = after.get(r["id"], {})
            # A mutant that no longer links is caught too: a test now calls what it took away.
            later = "killed" if (row.get("outcome"), row.get("by")) == ("no-compile", "link") else row.get("outcome")
            c["equivalent"] += r["id"] in same
            c["gpu only"] += r["id"] in gpu and r["id"] not in same
            c["killed after"] += r["id"] not in same and r["id"] not in gpu and (later in ("killed", "timeout") or r["id"] in hand)

    def line(name, c):
        tested = c["killed"] + c["timeout"] + c["survived"]
        killed = c["killed"] + c["timeout"]
        judged = tested - c["equivalent"] - c["gpu only"]
        rate = "%.0f%%" % (100.0 * (killed + c["killed after"]) / judged) if judged > 0 else "-"
        print("| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s |" % (
            name, sum(c[k] for k in ("killed", "timeout", "survived", "no-compile", "identical")), c["no-compile"], c["identical"],
            tested, killed, c["survived"], c["equivalent"], c["gpu only"], killed + c["killed after"], rate))

    print("| folder | mutants tried | did not compile | identical objects | tested | killed | survived | equivalent | GPU only "
          "| killed after | kill rate after |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for folder, c in sorted(per.items()):
        line(folder, c)
    line("all", sum(per.values(), collections.Counter()))
    for r in rows.values():
        if r["outcome"] == "survived":
            later = after.get(r["id"], {})
            note = same.get(r["id"]) or gpu.get(r["id"]) or "%s %s" % (later.get("outcome", "not rechecked"), later.get("by", ""))
            if r["id"] in hand and later.get("outcome") not in ("killed", "timeout"):
                note += "; by hand: " + hand[r["id"]].split("\t")[-1]
            print("survived: %s:%s  %s  ==>  %s  [%s]" % (r["file"], r["line"], r["original"], r["mutant"], note.strip()))
