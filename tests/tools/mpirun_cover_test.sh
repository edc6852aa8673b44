#!/usr/bin/env bash
# Four ranks under mpirun (Open MPI sets OMPI_COMM_WORLD_RANK/SIZE) shard one shuffled epoch:
# together they cover every sample exactly once (drop_remainder) or once plus padding (default).
# Then four ranks stop after 2 batches, and the rest of that epoch is resumed from their state on 2
# and on 3 ranks, padded and dropped: every sample once across the two runs, equal shares per rank,
# and the next epoch that of an uninterrupted run on that many ranks; a state of other data or seed,
# or of an unknown version, is refused.
set -euo pipefail
pf=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
mpi=(mpirun --allow-run-as-root --oversubscribe -np 4)
common=(run --samples 103 --height 4 --width 4 --batch 5 --device cpu --workers 1 --shuffle --seed 11 --print-indices)
for mode in pad drop; do
  extra=()
  [[ $mode == drop ]] && extra=(--drop-remainder)
  PINFEED_LOG_LEVEL=warn "${mpi[@]}" "$pf" "${common[@]}" "${extra[@]}" >"$work/$mode.txt" 2>"$work/$mode.err" || {
    cat "$work/$mode.err"; exit 1; }
done
python3 - "$work" <<'PY'
import collections, sys
work = sys.argv[1]
def load(mode):
    seen = collections.Counter()
    lines = 0
    for line in open(f"{work}/{mode}.txt"):
        if line.startswith("indices "):
            lines += 1
            seen.update(int(x) for x in line.split()[2:])
    return seen, lines
pad, pad_lines = load("pad")
drop, drop_lines = load("drop")
# pad: 4 ranks x 26 positions = 104 picks; all 103 samples, one of them twice.
assert sum(pad.values()) == 104, sum(pad.values())
assert set(pad) == set(range(103)), sorted(set(range(103)) - set(pad))
assert sorted(pad.values()).count(2) == 1, pad.most_common(2)
# drop: 4 x 25 = 100 distinct samples, none twice.
assert sum(drop.values()) == 100 and len(drop) == 100 and max(drop.values()) == 1, drop.most_common(2)
assert pad_lines == 4 * 6 and drop_lines == 4 * 5, (pad_lines, drop_lines)
print("4 ranks cover the epoch: pad 104 picks of 103 samples, drop 100 distinct")
PY

# Elastic resume: 4 ranks stop after 2 batches of 5, each saving its state; then the rest of that
# epoch and one more run on 2 and on 3 ranks, with and without drop_remainder. --tag-output marks
# each line with its rank ("[1,R]<stdout>:").
tagged=(mpirun --allow-run-as-root --oversubscribe --tag-output)
for mode in pad drop; do
  extra=()
  [[ $mode == drop ]] && extra=(--drop-remainder)
  PINFEED_LOG_LEVEL=warn "${tagged[@]}" -np 4 "$pf" "${common[@]}" "${extra[@]}" --limit 2 \
    --save-state "$work/state-$mode-{rank}.json" >"$work/before-$mode.txt" 2>"$work/before-$mode.err" || {
    cat "$work/before-$mode.err"; exit 1; }
  for r in 0 1 2 3; do [[ -s $work/state-$mode-$r.json ]] || { echo "rank $r wrote no state ($mode)"; exit 1; }; done
  for w in 2 3; do
    # Each new rank may read any old rank's state: they all saved the same progress.
    PINFEED_LOG_LEVEL=info "${tagged[@]}" -np $w "$pf" "${common[@]}" "${extra[@]}" --epochs 2 \
      --resume "$work/state-$mode-{rank}.json" >"$work/after-$mode-$w.txt" 2>"$work/after-$mode-$w.err" || {
      cat "$work/after-$mode-$w.err"; exit 1; }
    # The next epoch as an uninterrupted run on w ranks gives it.
    PINFEED_LOG_LEVEL=warn "${tagged[@]}" -np $w "$pf" "${common[@]}" "${extra[@]}" --epochs 2 \
      >"$work/plain-$mode-$w.txt" 2>"$work/plain-$mode-$w.err" || { cat "$work/plain-$mode-$w.err"; exit 1; }
  done
done
grep -q "saved by 4 ranks after 2 batches each on 2 ranks: 63 samples left" "$work/after-pad-2.err" || {
  echo "no elastic resume line for 2 ranks:"; cat "$work/after-pad-2.err"; exit 1; }
python3 - "$work" <<'PY'
import collections, re, sys
work = sys.argv[1]
line_re = re.compile(r"^\[\d+,(\d+)\]<stdout>:indices (\d+):(\d+)((?: -?\d+)*)$")
def load(name):
    """{(rank, epoch): [(batch, [indices])]} from a --tag-output run."""
    out = collections.defaultdict(list)
    for line in open(f"{work}/{name}.txt"):
        m = line_re.match(line.rstrip("\n"))
        if m:
            out[(int(m[1]), int(m[2]))].append((int(m[3]), [int(x) for x in m[4].split()]))
    return out
def picks(runs, epoch):
    seen = collections.Counter()
    for (rank, e), batches in runs.items():
        if e == epoch:
            for _, idx in batches:
                seen.update(idx)
    return seen
def left_in(name):
    m = re.search(r"saved by 4 ranks after 2 batches each on \d+ ranks: (\d+) samples left", open(f"{work}/{name}.err").read())
    assert m, f"{name}: no elastic resume line"
    return int(m[1])
for mode in ("pad", "drop"):
    before = load(f"before-{mode}")
    b = picks(before, 0)
    assert sum(b.values()) == 40 and len(b) == 40, (mode, b.most_common(2))
    assert sorted(r for r, _ in before) == [0, 1, 2, 3] and all(len(v) == 2 for v in before.values()), mode
    for w in (2, 3):
        after, plain = load(f"after-{mode}-{w}"), load(f"plain-{mode}-{w}")
        left = left_in(f"after-{mode}-{w}")
        # pad: the epoch is all 103 samples; drop: the 100 that divide over 4 ranks. 40 were taken.
        assert left == (103 if mode == "pad" else 100) - 40, (mode, w, left)
        a = picks(after, 0)
        assert not set(a) & set(b), (mode, w, sorted(set(a) & set(b))[:5])
        share = -(-left // w) if mode == "pad" else left // w
        # Equal shares: every rank the same samples and batches, so no rank waits in a collective.
        per_rank = {r: sum(len(i) for _, i in after[(r, 0)]) for r in range(w)}
        assert set(per_rank.values()) == {share}, (mode, w, per_rank)
        assert len({len(after[(r, 0)]) for r in range(w)}) == 1, (mode, w)
        assert sum(a.values()) == share * w, (mode, w, sum(a.values()))
        if mode == "pad":  # every remaining sample; the padding repeats ones from the epoch
            assert set(a) | set(b) == set(range(103)), (w, sorted(set(range(103)) - set(a) - set(b))[:5])
            assert sum(v - 1 for v in a.values()) == share * w - left, (w, a.most_common(3))
        else:  # distinct samples only, the ones that do not divide over the ranks left out
            assert max(a.values()) == 1 and set(a) <= set(range(103)) - set(b), (w, a.most_common(2))
        # The next epoch is the one an uninterrupted run on w ranks delivers, rank by rank.
        for r in range(w):
            assert after[(r, 1)] == plain[(r, 1)] and after[(r, 1)], (mode, w, r)
        print(f"{mode}: resumed on {w} ranks, {left} samples left, {share} per rank, the next epoch as a {w}-rank run's")
PY
# A state of another dataset or seed is refused, naming what differs.
if "$pf" run --samples 104 --height 4 --width 4 --batch 5 --device cpu --workers 1 --shuffle --seed 11 --rank 0 --world 2 \
    --resume "$work/state-pad-0.json" >/dev/null 2>"$work/other.err"; then
  echo "a state of 103 samples resumed over 104"; exit 1
fi
grep -q "dataset_size is 103 there, 104 here" "$work/other.err" || { cat "$work/other.err"; exit 1; }
if "$pf" run --samples 103 --height 4 --width 4 --batch 5 --device cpu --workers 1 --shuffle --seed 12 --rank 0 --world 2 \
    --resume "$work/state-pad-0.json" >/dev/null 2>"$work/seed.err"; then
  echo "a state of seed 11 resumed under seed 12"; exit 1
fi
grep -q "seed is 11 there, 12 here" "$work/seed.err" || { cat "$work/seed.err"; exit 1; }
python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); s["version"] = 99; json.dump(s, open(sys.argv[2], "w"))' \
  "$work/state-pad-0.json" "$work/state-v99.json"
if "$pf" "${common[@]}" --rank 0 --world 2 --resume "$work/state-v99.json" >/dev/null 2>"$work/version.err"; then
  echo "a state of version 99 was resumed"; exit 1
fi
grep -q "loader state version 99 is not supported" "$work/version.err" || { cat "$work/version.err"; exit 1; }
echo "elastic resume: 4 ranks -> 2 and 3 ranks, padded and dropped; foreign and unknown states refused"
