#!/usr/bin/env bash
# One allocation failed at each of POINTS points spread over a whole `pinfeed` command (an
# LD_PRELOAD shim, tests/fault/malloc_shim.c, counts every malloc from main() on): each
# run ends with exit 0 and the fault-free run's output, or exit 1 and one line saying that memory
# ran out; never a signal (std::terminate aborts), never a hang, never other batches.
# Commands: run (rrc, flip, checksums), pack and doctor over a folder of JPEG, PNG, WebP, BMP, PNM
# and TIFF files (Deflate, LZW, JPEG, PackBits, CCITT G3 and G4, uncompressed).
# Usage: tool_faults_test.sh PINFEED SHIM PYTHON WORK [POINTS [DOCTOR_POINTS]]   (PYTHON: one with Pillow)
set -uo pipefail
pf=$1 shim=$2 python=$3 work=$4 points=${5:-40} doctor_points=${6:-8}
if ! "$python" -c 'import PIL' 2>/dev/null; then
  [[ ${CI:-} == true ]] && { echo "tool_faults: Pillow is missing from $python (scripts/install-test-env.sh)" >&2; exit 1; }
  echo "tool_faults: skipped: Pillow is missing from $python (scripts/install-test-env.sh)"; exit 77
fi
rm -rf "$work" && mkdir -p "$work"
"$python" - "$work/folder" <<'PY'
import os, sys
from PIL import Image
root = sys.argv[1]
for c, cls in enumerate(["a", "b"]):
    os.makedirs(f"{root}/{cls}", exist_ok=True)
    for i in range(6):
        im = Image.linear_gradient("L").resize((40 + 7 * i, 36 + 5 * c)).convert("RGB")
        im.save(f"{root}/{cls}/{i}.jpg", quality=85)
    g = Image.radial_gradient("L")
    g.resize((33, 29)).convert("RGB").save(f"{root}/{cls}/x.bmp")
    g.resize((31, 27)).save(f"{root}/{cls}/y.pgm")
    g.resize((35, 30)).convert("RGBA").save(f"{root}/{cls}/z.png")
    g.resize((37, 26)).convert("RGB").save(f"{root}/{cls}/w.webp", quality=80)
    # TIFF: every codec that registers tags of its own (libtiff's allocations there fail in ways
    # of their own), and the plain ones.
    g.resize((30, 28)).convert("RGB").save(f"{root}/{cls}/v.tif", compression=["tiff_deflate", "tiff_lzw"][c])
    g.resize((29, 31)).convert("RGB").save(f"{root}/{cls}/u.tif", compression=["jpeg", "packbits"][c])
    g.resize((28, 26)).convert("1").save(f"{root}/{cls}/t.tif", compression=["group4", "group3"][c])
    g.resize((27, 25)).save(f"{root}/{cls}/s.tif")
PY
failed=0
# Runs "$@" with allocation K failed (0: none); its status, stdout and stderr in $work/{rc,out,err}.
attempt() {
  local k=$1; shift
  rm -f "$work/exit"
  PINFEED_EXIT_RECORD=$work/exit PINFEED_FAIL_ALLOCATION=$k LD_PRELOAD=$shim timeout 60 "$@" >"$work/out" 2>"$work/err"
  echo $? >"$work/rc"
}
# sweep NAME KEEP N COMMAND...: N points; KEEP, a regex of the output lines a run must repeat
# exactly, or has:REGEX, a line every finished run must print (for output that varies, the doctor's).
sweep() {
  local name=$1 keep=$2 n=$3; shift 3
  PINFEED_COUNT_ALLOCATIONS=1 LD_PRELOAD=$shim "$@" >"$work/clean.out" 2>"$work/clean.err" ||
    { echo "tool_faults: $name fails without a fault:"; cat "$work/clean.err"; failed=1; return; }
  local total
  total=$(sed -n 's/^allocations: //p' "$work/clean.err")
  [[ -n $total && $total -gt 100 ]] || { echo "tool_faults: $name: no allocation count ($total)"; failed=1; return; }
  local ok=0 oom=0 bad=0
  for ((p = 0; p < n; ++p)); do
    local k=$((1 + p * (total - 1) / (n - 1)))
    attempt "$k" "$@"
    local rc same
    rc=$(cat "$work/rc")
    if [[ $keep == has:* ]]; then
      grep -qE "${keep#has:}" "$work/out" && same=1 || same=0
    else
      diff -q <(grep -E "$keep" "$work/out") <(grep -E "$keep" "$work/clean.out") >/dev/null && same=1 || same=0
    fi
    if [[ $rc == 0 && $same == 1 ]]; then
      ok=$((ok + 1))
    elif [[ $rc == 1 ]] && grep -qiE 'out of memory|bad_alloc|cannot allocate|memory' "$work/err"; then
      oom=$((oom + 1))
    else
      bad=$((bad + 1))
      echo "tool_faults: $name, allocation $k of $total: exit $rc (its output kept in $work/bad-$k.out and .err)"
      tail -3 "$work/err" | sed 's/^/    /'
      cp "$work/out" "$work/bad-$k.out"; cp "$work/err" "$work/bad-$k.err"
      echo "    the program's own exit: $(cat "$work/exit" 2>/dev/null || echo 'none recorded (it did not end through _exit)')"
    fi
  done
  echo "tool_faults: $name: $n points of $total allocations: $ok as if nothing failed, $oom out of memory, $bad otherwise"
  [[ $bad == 0 ]] || failed=1
}
sweep "run over a folder" '^batch ' "$points" "$pf" run --source "folder:$work/folder" --transforms "rrc(24),hflip" --batch 4 \
  --device cpu --workers 2 --checksums --seed 3
sweep "pack" '^(wrote|packed|shard)' "$points" "$pf" pack --source "folder:$work/folder" --out "$work/shard" --shard-mb 1
# The doctor times every stage for seconds a run: fewer points, and its report (which varies with
# the timings) must reach its verdict.
sweep "doctor" 'has:^verdict: ' "$doctor_points" "$pf" doctor --source "folder:$work/folder" --transforms "rrc(24),hflip" \
  --batch 4 --device cpu --workers 1 --steps 4 --warmup 1 --step-ms 1
# Not swept yet: `info` and GPU runs read the node's topology with hwloc, and hwloc 2.9's
# hwloc_topology_load dereferences allocations that failed (a segmentation fault inside it, found
# by this sweep); TIFF files: libtiff 4.5.0 crashes when a realloc fails inside TIFFReadDirectory
# (TIFFSetField -> _TIFFCheckRealloc, a segmentation fault in libtiff, found by this sweep).
exit $failed
