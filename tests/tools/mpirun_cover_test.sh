#!/usr/bin/env bash
# Four ranks under mpirun (Open MPI sets OMPI_COMM_WORLD_RANK/SIZE) shard one shuffled epoch:
# together they cover every sample exactly once (drop_remainder) or once plus padding (default).
# Then four ranks stop after 2 batches, and the rest of that epoch is resumed from their state on 2
# and on 3 ranks: every sample once across the two runs; a state of other data or seed is refused.
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

# Elastic resume: 4 ranks stop after 2 batches of 5, each saving its state.
PINFEED_LOG_LEVEL=warn "${mpi[@]}" "$pf" "${common[@]}" --limit 2 --save-state "$work/state-{rank}.json" \
  >"$work/before.txt" 2>"$work/before.err" || { cat "$work/before.err"; exit 1; }
for r in 0 1 2 3; do [[ -s $work/state-$r.json ]] || { echo "rank $r wrote no state"; exit 1; }; done
for w in 2 3; do
  # Each new rank may read any old rank's state: they all saved the same progress.
  PINFEED_LOG_LEVEL=info mpirun --allow-run-as-root --oversubscribe -np $w "$pf" "${common[@]}" --epochs 1 \
    --resume "$work/state-{rank}.json" >"$work/after-$w.txt" 2>"$work/after-$w.err" || { cat "$work/after-$w.err"; exit 1; }
  grep -q "saved by 4 ranks after 2 batches each on $w ranks: 63 samples left" "$work/after-$w.err" || {
    echo "no elastic resume line for $w ranks:"; cat "$work/after-$w.err"; exit 1; }
done
python3 - "$work" <<'PY'
import collections, sys
work = sys.argv[1]
def load(name):
    seen, per_rank = collections.Counter(), collections.Counter()
    for line in open(f"{work}/{name}.txt"):
        if line.startswith("indices "):
            seen.update(int(x) for x in line.split()[2:])
    return seen
before = load("before")
assert sum(before.values()) == 40 and len(before) == 40, before.most_common(2)
for w in (2, 3):
    after = load(f"after-{w}")
    assert not set(after) & set(before), sorted(set(after) & set(before))[:5]
    assert set(after) | set(before) == set(range(103)), sorted(set(range(103)) - set(after) - set(before))[:5]
    per = -(-63 // w)
    assert sum(after.values()) == per * w, (sum(after.values()), per * w)  # equal shares, padded
    print(f"resumed on {w} ranks: 63 samples left, {per} per rank, every sample once across the runs")
PY
# A state of another dataset or seed is refused, naming what differs.
if "$pf" run --samples 104 --height 4 --width 4 --batch 5 --device cpu --workers 1 --shuffle --seed 11 --rank 0 --world 2 \
    --resume "$work/state-0.json" >/dev/null 2>"$work/other.err"; then
  echo "a state of 103 samples resumed over 104"; exit 1
fi
grep -q "dataset_size is 103 there, 104 here" "$work/other.err" || { cat "$work/other.err"; exit 1; }
if "$pf" run --samples 103 --height 4 --width 4 --batch 5 --device cpu --workers 1 --shuffle --seed 12 --rank 0 --world 2 \
    --resume "$work/state-0.json" >/dev/null 2>"$work/seed.err"; then
  echo "a state of seed 11 resumed under seed 12"; exit 1
fi
grep -q "seed is 11 there, 12 here" "$work/seed.err" || { cat "$work/seed.err"; exit 1; }
echo "elastic resume: 4 ranks -> 2 and 3 ranks; foreign states refused"
