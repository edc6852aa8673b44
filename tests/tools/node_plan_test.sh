#!/usr/bin/env bash
# The node plan on this host, as a user meets it:
# - local ranks under mpirun: with 2 ranks, the workers of both together never exceed the usable
#   cores; with 4, each runs one; every rank's batches equal those of the same rank without the
#   plan (PINFEED_NODE_PLAN=off: every rank at the TBB cap);
# - a real cgroup (root, writable v1 or v2 controllers; skipped with the reason elsewhere): a quota
#   of 0.5 CPU and a 512 MiB memory limit give `pinfeed info --json` 1 core and 512 MiB, `pinfeed
#   run` with slots that cannot fit fails naming the limit's file (exit 1), and on auto it runs
#   within the limit (no OOM kill); a JPEG header of 16000x16000 is refused before its decode,
#   naming the limit (decode_options::max_decode_bytes follows the plan). The cgroup is removed on
#   every path.
set -uo pipefail
pf=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
json_get() {  # json_get FILE EXPRESSION (Python, over j)
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"
}
cores=$(nproc)

# --- local ranks under mpirun --------------------------------------------------------------------
# Each rank writes its own file (mpirun's tagged output splits long lines between ranks).
mpi=(mpirun --allow-run-as-root --oversubscribe)
per_rank() {  # per_rank N PREFIX ARGS...: runs pinfeed ARGS on N ranks, rank r's output in PREFIX-r.txt
  local n=$1 prefix=$2; shift 2
  PINFEED_LOG_LEVEL=warn "${mpi[@]}" -np "$n" bash -c 'exec "$0" "$@" >"$PREFIX-$OMPI_COMM_WORLD_RANK.txt" 2>&1' \
    "$pf" "$@" 2>"$prefix.err"
}
common=(run --samples 96 --height 8 --width 8 --batch 8 --device cpu --shuffle --seed 5 --checksums)
for n in 2 4; do
  PREFIX=$work/info-$n per_rank $n "$work/info-$n" info --json ||
    { bad "mpirun -np $n pinfeed info --json"; cat "$work/info-$n.err" "$work"/info-$n-*.txt; continue; }
  PREFIX=$work/auto-$n per_rank $n "$work/auto-$n" "${common[@]}" ||
    { bad "mpirun -np $n pinfeed run (workers auto)"; cat "$work/auto-$n.err" "$work"/auto-$n-*.txt; continue; }
  PINFEED_NODE_PLAN=off PREFIX=$work/off-$n per_rank $n "$work/off-$n" "${common[@]}" ||
    { bad "mpirun -np $n pinfeed run without the plan"; cat "$work/off-$n.err" "$work"/off-$n-*.txt; continue; }
  if python3 - "$work" "$n" "$cores" <<'PY'
import json, re, sys
work, n, cores = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
plans = {r: json.load(open(f"{work}/info-{n}-{r}.txt"))["node_plan"] for r in range(n)}
for r, p in plans.items():
    assert p["local_ranks"]["size"] == n and p["local_ranks"]["rank"] == r, p["local_ranks"]
    assert p["local_ranks"]["source"] == "OMPI_COMM_WORLD_LOCAL_RANK/OMPI_COMM_WORLD_LOCAL_SIZE", p["local_ranks"]
def runs(name):
    workers, sums = {}, {}
    for r in range(n):
        for line in open(f"{work}/{name}-{n}-{r}.txt"):
            w = re.match(r"run: .*?, (\d+) workers,", line)
            if w and r not in workers: workers[r] = int(w[1])
            if line.startswith("batch "): sums.setdefault(r, []).append(line)
    return workers, sums
auto_w, auto_sums = runs("auto")
off_w, off_sums = runs("off")
assert all(w == cores for w in off_w.values()), f"without the plan every rank runs the TBB cap: {off_w}"
assert sorted(auto_w) == list(range(n)), auto_w
# Each rank on auto runs its plan's cores (the tool's TBB cap is the hardware threads).
for r, w in auto_w.items():
    assert w == min(plans[r]["rank"]["cores"], cores), (r, w, plans[r]["rank"])
total = sum(auto_w.values())
if n == 2: assert total <= cores, f"2 ranks run {auto_w} workers on {cores} cores"
if n == 4 and cores <= 4: assert all(w == 1 for w in auto_w.values()), auto_w
for r in range(n):
    assert auto_sums.get(r) and auto_sums[r] == off_sums.get(r), f"rank {r}: batches differ from the run without the plan"
print(f"{n} ranks: workers on auto {dict(sorted(auto_w.items()))} on {cores} cores; "
      f"{sum(len(v) for v in auto_sums.values())} batch digests equal to those without the plan ({off_w} workers)")
PY
  then ok "mpirun -np $n: the plan's ranks, workers within the cores, batches unchanged"
  else bad "mpirun -np $n: the plan's ranks, workers within the cores, batches unchanged"; fi
done

# --- pinfeed bench node, small: every row there, the many-workers batches equal -------------------
if "$pf" bench node --ranks 2 --samples 256 --height 32 --width 32 --transforms "" --rounds 1 --fixed 1 >"$work/bench.jsonl" 2>"$work/bench.err" &&
   python3 - "$work/bench.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
many = [r for r in rows if r.get("setting") == "many_workers"]
assert len(many) == 1 and many[0]["batches_equal_to_8_workers"] is True and many[0]["batches_compared"] == 10, many
assert many[0]["samples_per_s"] > 0 and many[0]["cpu"], many
settings = sorted(r["setting"] for r in rows if "setting" in r and r["setting"] != "many_workers")
assert settings == ["fixed", "plan", "tbb_cap"], settings
plan = [r for r in rows if r.get("setting") == "plan"][0]
assert len(plan["rank_workers"]) == 2 and all(w >= 1 for w in plan["rank_workers"]), plan
summary = [r for r in rows if r.get("summary")]
assert len(summary) == 1 and summary[0]["plan_over_tbb_cap"] > 0 and summary[0]["best_fixed_workers"] == 1, summary
print("bench node:", {k: summary[0][k] for k in ("plan_over_tbb_cap", "plan_over_best_fixed")},
      "many workers", round(many[0]["over_latency_bound"], 2), "of the latency bound")
PY
then ok "pinfeed bench node --ranks 2 (small): rows, summary, many-workers batches equal"
else bad "pinfeed bench node --ranks 2 (small)"; cat "$work/bench.err"; fi

# --- a real cgroup -------------------------------------------------------------------------------
made=()
enabled=()  # controllers this test enabled in the root's cgroup.subtree_control (v2), to disable again
cleanup() {
  local d
  for d in "${made[@]}"; do
    # Move any process left back to the parent, then remove the directory.
    if [[ -f $d/cgroup.procs ]]; then
      while read -r pid; do echo "$pid" >"$(dirname "$d")/cgroup.procs" 2>/dev/null; done <"$d/cgroup.procs"
    fi
    rmdir "$d" 2>/dev/null || echo "warning: could not remove $d"
  done
  made=()
  local c
  for c in "${enabled[@]}"; do echo "-$c" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true; done
  enabled=()
}
trap cleanup EXIT
skip_cgroup() { echo "skip real cgroup: $1"; }
name=pinfeed-node-plan-$$
cg_enter=""
limit_file=""
if [[ $(id -u) != 0 ]]; then
  skip_cgroup "not root"
elif [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then  # cgroup v2, unified
  parent=/sys/fs/cgroup
  for c in cpu memory; do
    if ! grep -qw "$c" "$parent/cgroup.subtree_control" 2>/dev/null; then
      echo "+$c" >"$parent/cgroup.subtree_control" 2>/dev/null && enabled+=("$c")
    fi
  done
  if mkdir "$parent/$name" 2>/dev/null; then
    made+=("$parent/$name")
    if echo "50000 100000" >"$parent/$name/cpu.max" 2>/dev/null && echo 536870912 >"$parent/$name/memory.max" 2>/dev/null; then
      cg_enter="echo \$\$ >$parent/$name/cgroup.procs"
      limit_file=$parent/$name/memory.max
    else
      skip_cgroup "cannot write cpu.max / memory.max in $parent/$name (controllers not delegated)"
    fi
  else
    skip_cgroup "cannot create $parent/$name"
  fi
elif [[ -d /sys/fs/cgroup/cpu && -d /sys/fs/cgroup/memory ]]; then  # cgroup v1
  cpu=/sys/fs/cgroup/cpu/$name mem=/sys/fs/cgroup/memory/$name
  if mkdir "$cpu" 2>/dev/null && made+=("$cpu") && mkdir "$mem" 2>/dev/null && made+=("$mem"); then
    if echo 100000 >"$cpu/cpu.cfs_period_us" && echo 50000 >"$cpu/cpu.cfs_quota_us" &&
       echo 536870912 >"$mem/memory.limit_in_bytes"; then
      cg_enter="echo \$\$ >$cpu/cgroup.procs && echo \$\$ >$mem/cgroup.procs"
      limit_file=$mem/memory.limit_in_bytes
    else
      skip_cgroup "cannot write the quota or the memory limit under $cpu and $mem"
    fi
  else
    skip_cgroup "cannot create cgroups under /sys/fs/cgroup/cpu and /sys/fs/cgroup/memory"
  fi
else
  skip_cgroup "no cgroup v2 or v1 cpu and memory hierarchies under /sys/fs/cgroup"
fi

in_cgroup() {  # in_cgroup COMMAND...: runs it inside the test's cgroup, returns its exit status
  bash -c "$cg_enter && exec \"\$@\"" bash "$@"
}
if [[ -n $cg_enter ]]; then
  if in_cgroup "$pf" info --json >"$work/cg-info.json" 2>"$work/cg-info.err" &&
     [[ $(json_get "$work/cg-info.json" 'j["node_plan"]["cores"]["value"]') == 1 ]] &&
     [[ $(json_get "$work/cg-info.json" 'j["node_plan"]["memory"]["bytes"]') == 536870912 ]] &&
     [[ $(json_get "$work/cg-info.json" 'j["node_plan"]["memory"]["source"]') == *"$limit_file"* ]]; then
    ok "in a cgroup of 0.5 CPU and 512 MiB: info --json says 1 core and 512 MiB, naming $limit_file"
  else
    bad "in a cgroup of 0.5 CPU and 512 MiB: info --json"; cat "$work/cg-info.json" "$work/cg-info.err"
  fi
  # 1024x1024x3 images in batches of 64: 192 MiB a slot; prefetch 8 + 1 slots cannot fit 512 MiB.
  big=(run --device cpu --samples 128 --height 1024 --width 1024 --batch 64 --limit 2)
  in_cgroup "$pf" "${big[@]}" --prefetch 8 >"$work/cg-fixed.txt" 2>&1
  rc=$?
  if [[ $rc == 1 ]] && grep -q "$limit_file" "$work/cg-fixed.txt" && grep -q "is more than this process's share of memory" "$work/cg-fixed.txt"; then
    ok "fixed prefetch 8 that cannot fit: exit 1, the error names the limit"
  else
    bad "fixed prefetch 8 that cannot fit (exit $rc)"; cat "$work/cg-fixed.txt"
  fi
  in_cgroup "$pf" "${big[@]}" >"$work/cg-auto.txt" 2>&1
  rc=$?
  if [[ $rc == 0 ]] && grep -q "^batches 2," "$work/cg-auto.txt"; then
    ok "prefetch auto in 512 MiB: runs within the limit ($(grep -m1 '^run:' "$work/cg-auto.txt" | grep -o 'prefetch [0-9]*[^,]*'))"
  else
    bad "prefetch auto in 512 MiB (exit $rc; 137 is the OOM killer)"; cat "$work/cg-auto.txt"
  fi
  # A JPEG whose frame header says 16000x16000 (a 732 MiB decode) in 3 KB: refused by name within
  # the cgroup's share (512 MiB over the threads that may decode), before anything is allocated.
  mkdir -p "$work/bomb/a"
  python3 - "$work/bomb/a/big.jpg" <<'PY2'
import struct, sys
# A 16x16 grey baseline JPEG, its SOF0 size then patched to 16000x16000.
soi, eoi = b"\xff\xd8", b"\xff\xd9"
dqt = b"\xff\xdb" + struct.pack(">H", 67) + b"\x00" + bytes([1] * 64)
sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, 16000, 16000, 1) + b"\x01\x11\x00"
dht = b"\xff\xc4" + struct.pack(">H", 20) + b"\x00" + bytes([1] + [0] * 15) + b"\x00"
dht += b"\xff\xc4" + struct.pack(">H", 20) + b"\x10" + bytes([1] + [0] * 15) + b"\x00"
sos = b"\xff\xda" + struct.pack(">HB", 8, 1) + b"\x01\x00\x00\x3f\x00"
open(sys.argv[1], "wb").write(soi + dqt + sof + dht + sos + bytes(3000) + eoi)
PY2
  in_cgroup "$pf" run --source "folder:$work/bomb" --device cpu --batch 1 --transforms "rrc(16)" >"$work/cg-bomb.txt" 2>&1
  rc=$?
  if [[ $rc == 1 ]] && grep -q "big.jpg: decoding this 16000x16000 JPEG image needs about 732.4 MiB" "$work/cg-bomb.txt" &&
     grep -q "one decode may take (this process's share of memory, 512.0 MiB (.*$limit_file.*), over the" "$work/cg-bomb.txt"; then
    ok "a 16000x16000 JPEG header in 512 MiB: refused before decoding, naming the limit"
  else
    bad "a 16000x16000 JPEG header in 512 MiB (exit $rc)"; cat "$work/cg-bomb.txt"
  fi
fi
cleanup

echo "node plan tests: $fails failed"
((fails == 0))
