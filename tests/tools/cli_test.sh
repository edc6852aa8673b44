#!/usr/bin/env bash
# The pinfeed command line: info, run (throughput, stats, trace, checksums), bench h2d, bad input.
set -uo pipefail
pf=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
fails=0
check() {  # check NAME COMMAND...: the command must succeed
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
expect_error() {  # expect_error NAME NEEDLE ARGS...: pinfeed must exit non-zero and print NEEDLE
  local name=$1 needle=$2; shift 2
  local out rc
  out=$("$pf" "$@" 2>&1); rc=$?
  if [[ $rc -ne 0 && $out == *"$needle"* ]]; then echo "ok   $name"; else
    echo "FAIL $name (rc=$rc): $out"; fails=$((fails + 1)); fi
}

"$pf" info >"$work/info.txt" 2>&1
check "info prints CUDA status" grep -q "CUDA runtime" "$work/info.txt"
check "info prints TBB" grep -q "^TBB" "$work/info.txt"
check "info prints pinned memory" grep -q "^pinned memory" "$work/info.txt"

small=(--samples 96 --height 32 --width 40 --batch 16 --device cpu)
"$pf" run "${small[@]}" --workers 2 --trace "$work/trace.json" --json "$work/stats.json" >"$work/run.txt" 2>"$work/run.err"
check "run prints throughput" grep -q "throughput: .* samples/s, .* MB/s" "$work/run.txt"
check "run prints stage stats" grep -q "^produce " "$work/run.err"
check "trace is JSON with produce spans" python3 -c "
import json,sys; t=json.load(open('$work/trace.json'))
n=sum(1 for e in t['traceEvents'] if e['name']=='produce' and e['ph']=='X')
sys.exit(0 if n==96 else 1)"
check "stats JSON is consistent" python3 -c "
import json,sys; s=json.load(open('$work/stats.json'))
ok = s['samples']==96 and s['batches']==6 and 0<=s['consumer_wait_fraction']<=1 and s['stages']['produce']['count']==96
sys.exit(0 if ok else 1)"

"$pf" run "${small[@]}" --workers 1 --epochs 2 --checksums >"$work/c1.txt" 2>/dev/null
"$pf" run "${small[@]}" --workers 3 --prefetch 4 --epochs 2 --checksums >"$work/c3.txt" 2>/dev/null
check "checksums: 12 batch lines" test "$(grep -c '^batch ' "$work/c1.txt")" -eq 12
check "checksums equal for 1 and 3 workers" diff <(grep '^batch ' "$work/c1.txt") <(grep '^batch ' "$work/c3.txt")
"$pf" run "${small[@]}" --seed 9 --checksums >"$work/c9.txt" 2>/dev/null
check "another seed gives other data" bash -c "! diff -q <(grep '^batch 0:0' '$work/c1.txt') <(grep '^batch 0:0' '$work/c9.txt') >/dev/null"
"$pf" run "${small[@]}" --limit 2 --normalize >"$work/limit.txt" 2>/dev/null
check "limit stops after 2 batches" grep -q "(2 batches)" "$work/limit.txt"

"$pf" bench h2d --batch-bytes 1048576 --sample-bytes 65536 --batches 8 --repeats 1 >"$work/h2d.jsonl" 2>/dev/null
check "bench h2d reports bare, ring and overhead" python3 -c "
import json,sys; rows=[json.loads(l) for l in open('$work/h2d.jsonl')]
impls={r.get('impl') for r in rows}
ok={'bare_memcpy','ring','ring_overhead'} <= impls and all(r['gb_per_s']>0 for r in rows if 'gb_per_s' in r)
sys.exit(0 if ok else 1)"

expect_error "unknown device" "unknown device 'tpu'" run --samples 8 --height 8 --width 8 --device tpu
expect_error "zero batch rejected" "--batch" run --batch 0
expect_error "unknown source" "--source" run --source imagenet
expect_error "trace to bad path" "/nonexistent/dir/t.json" run "${small[@]}" --trace /nonexistent/dir/t.json
expect_error "no subcommand" "subcommand" 
expect_error "bench sample bigger than batch" "sample_bytes <= batch_bytes" bench h2d --batch-bytes 10 --sample-bytes 100

echo "$fails failed"
exit $((fails > 0))
