#!/usr/bin/env bash
# Four ranks under mpirun (Open MPI sets OMPI_COMM_WORLD_RANK/SIZE) shard one shuffled epoch:
# together they cover every sample exactly once (drop_remainder) or once plus padding (default).
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
