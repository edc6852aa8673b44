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

check "--version prints the version and exits 0" bash -c "'$pf' --version | grep -qE '^pinfeed [0-9]+\.[0-9]+\.[0-9]+$'"
# OpenCV imgcodecs (and GDAL, HDF5, poppler, ... that Debian's build of it pulls in) is a module
# opened on the first image that needs it, never a dependency of the program.
check "the program links no imgcodecs, GDAL, poppler, HDF5, netCDF or SpatiaLite" \
  bash -c "! ldd '$pf' | grep -iE 'imgcodecs|gdal|poppler|hdf5|netcdf|spatialite'"
check "--version maps no imgcodecs" bash -c "! LD_DEBUG=files '$pf' --version 2>&1 | grep -q imgcodecs"

"$pf" info >"$work/info.txt" 2>&1
check "info prints CUDA status" grep -q "CUDA runtime" "$work/info.txt"
check "info prints TBB" grep -q "^TBB" "$work/info.txt"
check "info prints pinned memory" grep -q "^pinned memory" "$work/info.txt"
check "info prints the CPU model" grep -q "^CPU  " "$work/info.txt"
check "info prints the JPEG Huffman decoder" grep -qE "^JPEG Huffman +(pinfeed's|libjpeg-turbo's)" "$work/info.txt"
check "info prints the SIMD level" grep -qE "^SIMD +(scalar|avx2|avx512) in use" "$work/info.txt"
check "info prints the node plan's cores with their source" grep -qE "^  cores +[0-9]+ of [0-9]+ hardware threads \(" "$work/info.txt"
check "info prints the node plan's memory and ranks" grep -qE "^  local ranks +1 \(one process\)" "$work/info.txt"
"$pf" info --json >"$work/info.json" 2>"$work/info-json.err"
check "info --json gives the plan" python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
p = j['node_plan']
assert p['cores']['value'] >= 1 and p['cores']['source'], p['cores']
assert p['memory']['bytes'] > 0 and p['rank']['cores'] >= 1, p
assert p['local_ranks'] == {'rank': 0, 'size': 1, 'source': 'one process'}, p['local_ranks']
" "$work/info.json"
LOCAL_WORLD_SIZE=abc LOCAL_RANK=0 "$pf" info >"$work/info-bad-rank.txt" 2>&1
check "a malformed LOCAL_WORLD_SIZE is named, and the plan is one process" grep -q "LOCAL_WORLD_SIZE=abc is not a count of ranks" "$work/info-bad-rank.txt"
expect_error "run --bind takes plan or none" "--bind must be plan or none, got 'socket'" run --device cpu --samples 16 --bind socket
PINFEED_SIMD=scalar "$pf" info >"$work/info-scalar.txt" 2>&1
check "PINFEED_SIMD=scalar caps the level" grep -qE "^SIMD +scalar in use .*capped by PINFEED_SIMD" "$work/info-scalar.txt"
out=$(PINFEED_SIMD=avx9000 "$pf" info 2>&1); rc=$?
check "a bad PINFEED_SIMD is an error naming the value" test $rc -eq 2 -a -n "$(echo "$out" | grep "avx9000" | grep "scalar, avx2, avx512")"
out=$(PINFEED_LOG_LEVEL=loud "$pf" run --device cpu --samples 8 --height 8 --width 8 --batch 4 --limit 1 2>&1); rc=$?
check "a bad PINFEED_LOG_LEVEL is named, and the run goes on at info" test $rc -eq 0 -a -n "$(echo "$out" | grep "PINFEED_LOG_LEVEL='loud' is not a level (error, warn, info, debug)")"
"$pf" bench sampler --device cpu --sizes 100 --repeats 1 --min-sample-ms 0.1 --simd all >"$work/simd.jsonl" 2>/dev/null
check "bench sampler --simd all: batched rows at every level, with host fields" python3 -c "
import json
rows = [json.loads(l) for l in open('$work/simd.jsonl') if l.startswith('{')]
b = [r for r in rows if r.get('impl') == 'batched']
levels = [r['simd'] for r in b]
assert levels[0] == 'scalar' and len(levels) == len(set(levels)) >= 1, levels
assert all(r['cpu'] and r['compiler'] and r['build_type'] for r in b), b
"
expect_error "run --batch far too large names the option and the bytes" "batch_size 100000000" run --device cpu --samples 10 --batch 100000000
expect_error "run --memory-budget too small names each part and the budget" "the memory budget of 1000 bytes is too small for host slots" run --device cpu --samples 64 --limit 1 --memory-budget 1KB
expect_error "run --memory-budget that is no size quotes it" "'8 gigs' is not a size" run --device cpu --samples 64 --limit 1 --memory-budget "8 gigs"
expect_error "run --memory-budget above the machine names both" "is more than the memory this process may use" run --device cpu --samples 64 --limit 1 --memory-budget 1000TiB
check "run --memory-budget that fits runs" "$pf" run --device cpu --samples 64 --height 64 --width 64 --limit 1 --memory-budget 64MiB
expect_error "bench sampler --simd rejects an unknown level" "not one of scalar, avx2, avx512" bench sampler --device cpu --sizes 100 --simd sse9

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

"$pf" run "${small[@]}" --workers 1 --epochs 2 --checksums --json "$work/epochs.json" >"$work/c1.txt" 2>"$work/c1.err"
check "run --json gives each epoch's samples, time and rate, which add up to the run's" python3 -c "
import json,sys; s=json.load(open('$work/epochs.json')); e=s['epochs']
ok = [x['epoch'] for x in e]==[0,1] and all(x['samples']==96 and x['batches']==6 and x['seconds']>0 for x in e)
ok = ok and all(abs(x['samples_per_s']*x['seconds']-x['samples'])<1e-6*x['samples'] for x in e)
ok = ok and sum(x['samples'] for x in e)==s['samples'] and sum(x['seconds'] for x in e)<=s['wall_s']*1.01+0.01
sys.exit(0 if ok else 1)"
check "run prints each epoch's rate on a run of several" bash -c "grep -c '^epoch [01]: 96 samples in .* s, .* samples/s' '$work/c1.err' | grep -qx 2"
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

# pinfeed sample: .npy in, .npy out
python3 - "$work" <<'PY'
import struct, sys
work = sys.argv[1]
def npy(name, descr, shape, data, fortran=False, version=1):
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)
    while (10 + len(d) + 1) % 64: d += ' '
    d += '\n'
    open(work + '/' + name, 'wb').write(b'\x93NUMPY' + bytes([version, 0]) + struct.pack('<H', len(d)) + d.encode() + data)
row = [1, 0, -1, 1, 0, 0, 1, 1, 0, 0, 2, -1]
npy('labels.npy', '<i8', '(3, 12)', struct.pack('<36q', *(row * 3)))
npy('labels1d.npy', '<i4', '(12,)', struct.pack('<12i', *row))
npy('float.npy', '<f4', '(12,)', struct.pack('<12f', *row))
npy('cube.npy', '<i8', '(1, 2, 6)', struct.pack('<12q', *row))
npy('short.npy', '<i8', '(3, 12)', struct.pack('<30q', *(row * 3)[:30]))
npy('fortran.npy', '<i8', '(3, 12)', struct.pack('<36q', *(row * 3)), fortran=True)
PY
"$pf" sample --labels "$work/labels.npy" --k 6 --seed 3 --out "$work/idx.npy" --valid "$work/valid.npy" 2>/dev/null
check "sample writes [3, 6] indices, picks of the right classes" python3 - "$work" <<'PY'
import struct, sys
work = sys.argv[1]
def load(name):
    b = open(work + '/' + name, 'rb').read()
    hl = struct.unpack('<H', b[8:10])[0]
    header = b[10:10 + hl].decode()
    return header, b[10 + hl:]
h, data = load('idx.npy')
assert "'descr': '<i8'" in h and "(3, 6)" in h, h
idx = struct.unpack('<18q', data)
row = [1, 0, -1, 1, 0, 0, 1, 1, 0, 0, 2, -1]
for r in range(3):
    picks = idx[6 * r: 6 * r + 6]
    assert len(set(picks)) == 6 and all(row[i] != -1 for i in picks), picks
    assert sum(1 for i in picks if row[i] > 0) == 3, picks
h, data = load('valid.npy')
assert struct.unpack('<3i', data) == (6, 6, 6)
PY
"$pf" sample --labels "$work/labels1d.npy" --k 20 --out "$work/idx1d.npy" --valid "$work/valid1d.npy" 2>/dev/null
check "sample pads with -1 when the row has too few items" python3 -c "
import struct; b=open('$work/idx1d.npy','rb').read(); v=struct.unpack('<20q', b[-160:])
assert v[10:] == (-1,)*10 and -1 not in v[:10], v"
"$pf" sample --labels "$work/labels.npy" --k 6 --seed 3 --out "$work/idx2.npy" 2>/dev/null
check "sample is deterministic" cmp -s "$work/idx.npy" "$work/idx2.npy"
expect_error "sample: float labels" "dtype float32" sample --labels "$work/float.npy" --k 2 --out "$work/x.npy"
expect_error "sample: 3-D labels" "3 dimensions" sample --labels "$work/cube.npy" --k 2 --out "$work/x.npy"
expect_error "sample: truncated labels" "truncated" sample --labels "$work/short.npy" --k 2 --out "$work/x.npy"
expect_error "sample: Fortran order" "Fortran" sample --labels "$work/fortran.npy" --k 2 --out "$work/x.npy"
expect_error "sample: missing file" "$work/none.npy" sample --labels "$work/none.npy" --k 2 --out "$work/x.npy"
expect_error "sample: negative k" "k must be >= 0, got -2" sample --labels "$work/labels.npy" --k -2 --out "$work/x.npy"
expect_error "sample: fraction" "positive_fraction must be in [0, 1], got 2" sample --labels "$work/labels.npy" --k 2 --positive-fraction 2 --out "$work/x.npy"
expect_error "sample: mode" "unknown mode 'fair'" sample --labels "$work/labels.npy" --k 2 --mode fair --out "$work/x.npy"
expect_error "sample: unwritable output" "/nonexistent/x.npy" sample --labels "$work/labels.npy" --k 2 --out /nonexistent/x.npy

# Resume through the command line: a run stopped after 2 batches and resumed equals one run.
"$pf" run "${small[@]}" --shuffle --epochs 2 --checksums >"$work/whole.txt" 2>/dev/null
"$pf" run "${small[@]}" --shuffle --epochs 2 --checksums --limit 2 --save-state "$work/state.json" >"$work/part1.txt" 2>/dev/null
"$pf" run "${small[@]}" --shuffle --epochs 2 --checksums --resume "$work/state.json" >"$work/part2.txt" 2>/dev/null
check "resume continues exactly" diff <(grep '^batch ' "$work/whole.txt") <(cat "$work/part1.txt" "$work/part2.txt" | grep '^batch ')
expect_error "resume: missing state" "$work/nostate.json" run "${small[@]}" --resume "$work/nostate.json"
expect_error "resume: foreign state" "seed" run "${small[@]}" --seed 5 --resume "$work/state.json"
expect_error "rank outside world" "rank 5 is not below world size 4" run "${small[@]}" --rank 5 --world 4

# The article's pipeline through --transforms and --pipeline.
art=(run --samples 48 --height 40 --width 36 --batch 16 --device cpu --transforms "crop(24),mask(0.25),ycbcr,scale")
"$pf" "${art[@]}" --workers 1 --checksums >"$work/art1.txt" 2>"$work/art1.err"
"$pf" "${art[@]}" --workers 2 --checksums >"$work/art2.txt" 2>/dev/null
check "transforms: 3 batches" test "$(grep -c '^batch ' "$work/art1.txt")" -eq 3
check "transforms: same bits for 1 and 2 workers" diff <(grep '^batch ' "$work/art1.txt") <(grep '^batch ' "$work/art2.txt")
check "transforms: stats show the transform stage" grep -q "^transform " "$work/art1.err"
echo '{"transforms": ["crop(24)", "mask(0.25)", "ycbcr", "scale"]}' >"$work/pipe.json"
"$pf" run --samples 48 --height 40 --width 36 --batch 16 --device cpu --workers 2 --checksums --pipeline "$work/pipe.json" >"$work/art3.txt" 2>/dev/null
check "pipeline file equals the same --transforms" diff <(grep '^batch ' "$work/art1.txt") <(grep '^batch ' "$work/art3.txt")
expect_error "transforms: unknown step with a caret" "unknown transform 'blur'" run --samples 8 --height 8 --width 8 --transforms "crop(4),blur(2)"
expect_error "transforms: crop larger than the image" "crop(64)" run --samples 8 --height 8 --width 8 --transforms "crop(64)"
expect_error "transforms: --normalize on float output" "--normalize needs uint8" run --samples 8 --height 8 --width 8 --transforms "crop(4),scale" --normalize
expect_error "transforms: both spellings" "either --transforms or --pipeline" run --samples 8 --transforms "crop(4)" --pipeline "$work/pipe.json"

# Image datasets on disk: an ImageFolder tree of PNG files (decoded through the imgcodecs module),
# and a file list.
python3 - "$work" <<'PY'
import os, struct, sys, zlib
def png(w, h, rgb):
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    rows = b"".join(b"\0" + rgb[y * w * 3:(y + 1) * w * 3] for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
root = sys.argv[1] + "/folder"
for c, cls in enumerate(["ants", "bees"]):
    os.makedirs(f"{root}/{cls}", exist_ok=True)
    for i in range(5):
        w, h = 12 + i, 10 + c
        data = bytes((x * 20 + y * 7 + c * 50 + i) % 256 for y in range(h) for x in range(w) for _ in range(3))
        open(f"{root}/{cls}/{i}.png", "wb").write(png(w, h, data))
with open(sys.argv[1] + "/list.txt", "w") as f:
    f.write("folder/ants/0.png 0\nfolder/bees/4.png 1\n")
PY
"$pf" run --source "folder:$work/folder" --transforms "center_crop(8)" --batch 4 --device cpu --print-indices >"$work/folder.txt" 2>"$work/folder.err"
check "folder: 10 images in 3 batches" test "$(grep -c '^indices ' "$work/folder.txt")" -eq 3
check "folder: decode stage timed" grep -q "^decode " "$work/folder.err"
check "folder: where the samples were decoded" grep -q "^decode: on the host; device 0, host 10$" "$work/folder.err"
check "folder: auto over a host decode says nothing of the augmentations" bash -c "! grep -q '^augment:' '$work/folder.err'"
"$pf" run --source "folder:$work/folder" --transforms "center_crop(8)" --batch 4 --device cpu --decode auto 2>"$work/auto.err" >/dev/null
check "folder: decode auto without a GPU stays on the host" grep -q "^decode: on the host; device 0, host 10$" "$work/auto.err"
expect_error "decode device needs the batches on a GPU" "decode device (--decode, or the --config file) decodes on the GPU, but the batches stay on the cpu" \
  run --source "folder:$work/folder" --transforms "center_crop(8)" --batch 4 --device cpu --decode device
printf '{"schema": "pinfeed.config/1", "decode": "device"}\n' >"$work/decode.json"
expect_error "a config's decode device is checked like the option" "but the batches stay on the cpu" \
  run --source "folder:$work/folder" --transforms "center_crop(8)" --batch 4 --device cpu --config "$work/decode.json"
expect_error "decode device-inexact needs the batches on a GPU too" "decode device-inexact (--decode, or the --config file) decodes on the GPU" \
  run --source "folder:$work/folder" --transforms "center_crop(8)" --batch 4 --device cpu --decode device-inexact
expect_error "decode takes host, device, auto or device-inexact" "--decode" run --decode gpu --device cpu
expect_error "augment-on device needs the batches on a GPU" "--augment-on device runs the steps on the GPU, but the batches stay on the cpu (--device): use --augment-on host or auto" \
  run --source "folder:$work/folder" --transforms "center_crop(8),trivial_augment" --batch 4 --device cpu --augment-on device
expect_error "augment-on takes host, device or auto" "--augment-on" run --augment-on gpu --device cpu
"$pf" run --source "folder:$work/folder" --transforms "center_crop(8),mask(0.25)" --batch 4 --device cpu --augment-on host \
  --json "$work/augment.json" 2>"$work/augment.err" >/dev/null
check "augment host: why the steps could not move anyway" grep -q "^augment: on the host (not the device: step mask(0.25) has no device form)$" "$work/augment.err"
check "augment host: the json says where and why" python3 -c "
import json, sys
a = json.load(open(sys.argv[1]))['augment']
assert a == {'path': 'host', 'device_steps': '', 'tail_on_device': False, 'not_on_device': 'step mask(0.25) has no device form'}, a
" "$work/augment.json"
check "folder: the run header counts the folder's 10 samples, not the synthetic default" grep -q "^run: .*, 10 samples," "$work/folder.err"
check "folder: the PNGs opened the imgcodecs module" bash -c "LD_DEBUG=files '$pf' run --source 'folder:$work/folder' --batch 4 --device cpu --limit 1 --transforms 'center_crop(8)' 2>&1 | grep -q 'libpinfeed_imgcodecs.so'"
out=$(PINFEED_IMGCODECS_MODULE=$work/no-such-module.so "$pf" run --source "folder:$work/folder" --transforms "center_crop(8)" --batch 4 --device cpu 2>&1); rc=$?
check "a missing imgcodecs module fails naming the image, its format and the path tried" \
  test $rc -ne 0 -a -n "$(echo "$out" | grep "ants/0.png: a PNG image, which needs pinfeed's PNG, WebP and TIFF module" | grep "no-such-module.so: no such file")"
libz=$(ldconfig -p | sed -n 's/.*libz\.so\.1 .*=> //p' | head -1)
out=$(PINFEED_IMGCODECS_MODULE=$libz "$pf" run --source "folder:$work/folder" --transforms "center_crop(8)" --batch 4 --device cpu 2>&1); rc=$?
check "a library that is no imgcodecs module is refused, named" \
  test $rc -ne 0 -a -n "$(echo "$out" | grep "libz.so.1: no pinfeed_imgcodecs_entry_v1 in it")"
"$pf" run --source "list:$work/list.txt" --transforms "center_crop(8)" --batch 2 --device cpu --checksums >"$work/list.out" 2>/dev/null
check "list: one batch of 2" test "$(grep -c '^batch ' "$work/list.out")" -eq 1
printf 'not a picture' >"$work/folder/bees/2.png"
expect_error "folder: a bad file fails naming it" "bees/2.png" run --source "folder:$work/folder" --transforms "center_crop(8)" --batch 4 --device cpu
"$pf" run --source "folder:$work/folder" --transforms "center_crop(8)" --batch 4 --device cpu --on-error skip >"$work/skip.txt" 2>"$work/skip.err"
check "folder: skip policy delivers and lists the bad file" grep -q "bees/2.png" "$work/skip.err"
check "folder: skip counts the bad sample once and the slots it cost" grep -qE "^skipped 1 bad sample \([0-9]+ slots? filled by a stand-in\)" "$work/skip.err"
expect_error "--max-bad-fraction needs --on-error skip" "caps --on-error skip" run --source "folder:$work/folder" --transforms "center_crop(8)" --batch 4 --device cpu --max-bad-fraction 0.5
expect_error "--max-bad-fraction stops a mostly bad run" "max_bad_fraction" run --source "folder:$work/folder" --transforms "center_crop(8)" --batch 4 --device cpu --on-error skip --max-bad-fraction 0.05
"$pf" pack --source "folder:$work/folder" --out "$work/shard" --shard-mb 0.001 >"$work/pack.txt" 2>&1
check "pack writes several shards" test "$(ls "$work"/shard-*.tar | wc -l)" -gt 1
"$pf" run --source "shards:$work/shard-*.tar" --transforms "center_crop(8)" --batch 4 --device cpu --on-error skip --checksums >"$work/fromshards.txt" 2>/dev/null
"$pf" run --source "folder:$work/folder" --transforms "center_crop(8)" --batch 4 --device cpu --on-error skip --checksums >"$work/fromfolder.txt" 2>/dev/null
check "shards give the folder's batches" diff <(grep '^batch ' "$work/fromshards.txt") <(grep '^batch ' "$work/fromfolder.txt")
check "GNU tar lists a shard" tar -tf "$work/shard-000000.tar"
check "pack writes a sidecar index per shard" test "$(ls "$work"/shard-*.tar.idx | wc -l)" -eq "$(ls "$work"/shard-*.tar | wc -l)"
mkdir -p "$work/idx-before" && cp "$work"/shard-*.tar.idx "$work/idx-before/" && rm "$work"/shard-*.tar.idx
"$pf" index --shards "$work/shard-*.tar" >"$work/index.txt"
check "index writes the same sidecar indexes as pack" diff <(cd "$work/idx-before" && cat *.idx) <(cd "$work" && cat shard-*.tar.idx)
"$pf" run --source "shards:$work/shard-*.tar" --transforms "center_crop(8)" --batch 4 --device cpu --on-error skip --checksums \
  --shuffle --seed 3 --shard-window 2 >"$work/window.txt" 2>/dev/null
"$pf" run --source "shards:$work/shard-*.tar" --transforms "center_crop(8)" --batch 4 --device cpu --on-error skip --checksums \
  --shuffle --seed 3 >"$work/shuffled.txt" 2>/dev/null
expect_error "--shard-window needs shards" "--shard-window 2 orders tar shards" run --source "folder:$work/folder" --shard-window 2
# The same shards over HTTP from a loopback nginx started (and stopped) here.
if [[ -x /usr/sbin/nginx ]]; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  mkdir -p "$work/www" && cp "$work"/shard-*.tar "$work/www/"
  cat >"$work/nginx.conf" <<CONF
daemon off; master_process off; worker_processes 1; pid $work/nginx.pid; error_log $work/nginx.err error;
events { worker_connections 64; }
http { access_log off; client_body_temp_path $work/nb; proxy_temp_path $work/np; fastcgi_temp_path $work/nf;
  uwsgi_temp_path $work/nu; scgi_temp_path $work/ns; server { listen 127.0.0.1:$port; root $work/www; } }
CONF
  /usr/sbin/nginx -c "$work/nginx.conf" -p "$work" &
  nginx_pid=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
  last=$(basename "$(ls "$work"/shard-*.tar | tail -1)" .tar)
  "$pf" run --source "shards:http://127.0.0.1:$port/shard-{000000..${last#shard-}}.tar" --transforms "center_crop(8)" --batch 4 \
    --device cpu --on-error skip --checksums >"$work/fromhttp.txt" 2>"$work/fromhttp.err"
  check "shards over HTTP give the local shards' batches" diff <(grep '^batch ' "$work/fromhttp.txt") <(grep '^batch ' "$work/fromshards.txt")
  check "shards over HTTP: the fetch stage and its requests are reported" grep -qE "^fetch: [0-9]+ requests \(0 retries\)" "$work/fromhttp.err"
  check "shards over HTTP are read whole by default, and the run says so" \
    grep -qE "^run: remote shards read whole, window 4, cache 1024 MiB \(in order; --shard-window 0: " "$work/fromhttp.err"
  "$pf" run --source "shards:http://127.0.0.1:$port/shard-{000000..${last#shard-}}.tar" --transforms "center_crop(8)" --batch 4 \
    --device cpu --on-error skip --checksums --shuffle --seed 3 --shard-window 0 >"$work/rangehttp.txt" 2>"$work/rangehttp.err"
  check "range reads over HTTP give the local shards' global shuffle" diff <(grep '^batch ' "$work/rangehttp.txt") <(grep '^batch ' "$work/shuffled.txt")
  check "range reads over HTTP: a request per sample, and the run says so" \
    grep -q "^run: remote shards read by a range request per sample, 64 to 1024 in flight as the latency needs" "$work/rangehttp.err"
  check "range reads over HTTP: the requests in flight and the read-ahead at the end are reported" \
    grep -qE "^fetch: range reads, [0-9]+ in flight and [0-9]+ samples read ahead at the end" "$work/rangehttp.err"
  "$pf" run --source "shards:http://127.0.0.1:$port/shard-{000000..${last#shard-}}.tar" --transforms "center_crop(8)" --batch 4 \
    --device cpu --on-error skip --checksums --shuffle --seed 3 --shard-window 0 --requests-in-flight 8 \
    >"$work/range8.txt" 2>"$work/range8.err"
  check "range reads with --requests-in-flight 8: 8 throughout, the same batches" \
    bash -c "grep -q '^run: remote shards read by a range request per sample, 8 in flight' '$work/range8.err' &&
      grep -qE '^fetch: range reads, 8 in flight and 128 samples read ahead' '$work/range8.err' &&
      diff <(grep '^batch ' '$work/range8.txt') <(grep '^batch ' '$work/shuffled.txt')"
  expect_error "--requests-in-flight past 1024 is refused" "--requests-in-flight" \
    run --source "shards:http://127.0.0.1:$port/shard-000000.tar" --shard-window 0 --requests-in-flight 1025 --device cpu
  expect_error "range reads have no shard cache" "--remote-cache-dir holds shards read whole; --shard-window 0 reads samples one by one" \
    run --source "shards:http://127.0.0.1:$port/shard-000000.tar" --shard-window 0 --remote-cache-dir "$work/rc" --device cpu
  cp "$work"/shard-*.tar.idx "$work/www/"
  "$pf" run --source "shards:http://127.0.0.1:$port/shard-{000000..${last#shard-}}.tar" --transforms "center_crop(8)" --batch 4 \
    --device cpu --on-error skip --checksums --shuffle --seed 3 --shard-window 2 --remote-cache-mb 1 \
    >"$work/windowhttp.txt" 2>"$work/windowhttp.err"
  check "whole shards over HTTP give the local shard-aware order's batches" diff <(grep '^batch ' "$work/windowhttp.txt") <(grep '^batch ' "$work/window.txt")
  check "whole shards over HTTP: fetched whole, each once, indexed from the sidecars" \
    grep -qE "^fetch: whole shards \(window 2, cache 1 MiB\): $(ls "$work"/shard-*.tar | wc -l) fetched, 0 samples range-read" "$work/windowhttp.err"
  "$pf" bench remote --data "$work/bench-data" --images 60 --shard-mb 0.5 --repeats 1 --batch 4 --workers 1 \
    --latency-ms 2 --window-shards 1 --cache-mb 2.5 >"$work/remote.jsonl" 2>"$work/remote.err"
  check "bench remote: local, loopback and latency rows, range and whole, whole shards at most 1.05x their bytes" python3 -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
got = {(r['mode'], r['read']) for r in rows}
assert got == {(m, k) for m in ('local', 'loopback', 'latency') for k in ('range', 'whole')}, got
for r in rows:
    assert r['images'] == 60 and r['cpu'] and r['images_per_s'] > 0, r
    # Each remote row's epoch runs next to one of its local row's: a local row times two a round.
    assert r['epochs'] == len(r['ratios_to_local']) == (2 if r['mode'] == 'local' else 1), r
    if r['mode'] == 'local':
        assert r['ratio_to_local'] == 1.0 and set(r['ratios_to_local']) == {1.0} and r['requests_between_epochs'] == 0, r
    else:
        assert r['ratio_to_local'] == r['ratios_to_local'][0] > 0, r
    assert r['default_read'] == (r['read'] == 'whole'), r
    if r['read'] == 'whole':
        assert r['window_shards'] == 1, r
    if r['read'] == 'whole' and r['mode'] != 'local':
        assert r['bytes_ratio'] <= 1.05 and r['cache_bytes'] == 2621440, r
    if r['read'] == 'range' and r['mode'] != 'local':
        assert abs(r['requests_per_image'] - 1) < 1e-9, r
        assert 64 <= r['requests_in_flight'] <= 1024 and r['read_ahead'] == 2 * r['requests_in_flight'], r
    assert r['adaptive_in_flight'] == (r['mode'] != 'local' and r['read'] == 'range'), r
    assert r['batch_fetch'] == r['batch_servers'] == (r['mode'] != 'local'), r
" "$work/remote.jsonl"
  "$pf" bench remote --data "$work/bench-data" --images 60 --shard-mb 0.5 --repeats 1 --batch 4 --workers 1 \
    --latency-ms 2 --preempting-servers --preempting-fetch >"$work/remote-plain.jsonl" 2>&1
  check "bench remote: --preempting-servers and --preempting-fetch keep the default policies, and say so;
       whole shards take the readers' default window (4 shards in a cache of three windows)" python3 -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
assert len(rows) == 6 and all(r['batch_fetch'] is False and r['batch_servers'] is False for r in rows), rows
assert all(r['window_shards'] == (4 if r['read'] == 'whole' else 0) for r in rows), rows
" "$work/remote-plain.jsonl"
  expect_error "shards over HTTP: a missing shard names the URL and the status" "http://127.0.0.1:$port/none.tar: HTTP 404" \
    run --source "shards:http://127.0.0.1:$port/none.tar" --transforms "center_crop(8)" --device cpu
  kill "$nginx_pid"; wait "$nginx_pid" 2>/dev/null || true
else
  echo "skip shards over HTTP: nginx is not installed (Debian: nginx-light)"
fi
expect_error "shards: no match" "matches no file" run --source "shards:$work/none-*.tar" --transforms "center_crop(8)"
expect_error "pack: bad source" "folder:PATH or list:FILE" pack --source "$work/folder" --out "$work/x"
expect_error "folder: missing" "does not exist" run --source "folder:$work/nothing" --transforms "center_crop(8)"
expect_error "folder: variable sizes need a crop" "vary in size" run --source "folder:$work/folder" --device cpu
expect_error "bad source spelling" "unknown source 'imagenet'" run --source imagenet
expect_error "bad policy" "--on-error must be fail or skip" run --on-error retry

# A slow consumer: the loader keeps up, the consumer hardly waits.
"$pf" run --samples 64 --height 16 --width 16 --batch 8 --device cpu --step-ms 20 --json "$work/slow.json" >/dev/null 2>&1
check "step-ms: eight 20 ms steps take at least 160 ms" python3 -c "
import json,sys; s=json.load(open('$work/slow.json'))
sys.exit(0 if s['wall_s'] >= 8 * 0.020 and 0 <= s['consumer_wait_fraction'] <= 1 else 1)"
expect_error "step-ms: negative" "--step-ms" run --step-ms -1
# Caching at a stage: processed samples from a pool of 4 repeat every 4 samples.
"$pf" run --samples 16 --height 20 --width 20 --batch 4 --device cpu --transforms "crop(8),ycbcr,scale" --cache processed --cache-pool 4 --checksums >"$work/cache.txt" 2>"$work/cache.err"
check "cache processed: every batch holds the same 4 samples" test "$(grep '^batch ' "$work/cache.txt" | awk '{for(i=6;i<=NF;i++) printf "%s ", $i; print ""}' | sort -u | wc -l)" -eq 1
"$pf" run --samples 16 --height 20 --width 20 --batch 4 --device cpu --transforms "crop(8),hflip" --cache steps:1 >/dev/null 2>&1
check "cache steps:1 runs" test $? -eq 0
expect_error "cache: bad stage" "--cache must be none, raw, decoded, steps:K or processed" run --cache read
expect_error "cache: bad steps" "steps:K needs a number" run --cache steps:x
expect_error "cache: too many steps" "cache after 5 steps" run --samples 8 --height 8 --width 8 --transforms "crop(4)" --cache steps:5

expect_error "unknown device" "unknown device 'tpu'" run --samples 8 --height 8 --width 8 --device tpu
expect_error "zero batch rejected" "--batch" run --batch 0
expect_error "trace to bad path" "/nonexistent/dir/t.json" run "${small[@]}" --trace /nonexistent/dir/t.json
expect_error "no subcommand" "subcommand" 
expect_error "bench sample bigger than batch" "sample_bytes <= batch_bytes" bench h2d --batch-bytes 10 --sample-bytes 100

# The doctor: a report with a verdict on stdout, the same as JSON, and clear errors.
doc=(doctor --samples 64 --height 64 --width 64 --batch 8 --device cpu --transforms "crop(32),mask(0.25),ycbcr,scale"
     --steps 4 --min-mode-seconds 0.1)
"$pf" "${doc[@]}" --json "$work/doctor.json" --trace "$work/doctor-trace.json" >"$work/doctor.txt" 2>"$work/doctor.err"
check "doctor exits 0" test $? -eq 0
check "doctor prints a verdict" grep -q "^verdict: " "$work/doctor.txt"
check "doctor prints the mode table" grep -q "^L3   processed samples cached" "$work/doctor.txt"
check "doctor prints the per-transform ladder" grep -q "mask(0.25)" "$work/doctor.txt"
check "doctor JSON matches the text" python3 -c "
import json,sys; r=json.load(open('$work/doctor.json')); t=open('$work/doctor.txt').read()
ids=[m['id'] for m in r['modes']]
ok = r['schema']=='pinfeed.doctor/3' and ids[:6]==['L0','L1','L2','L3','L4','L5'] and ('verdict: '+r['verdict']) in t
ok = ok and all(0<=m['consumer_wait']<=1 for m in r['modes'] if m['ran']) and len(r['transforms'])==3
sys.exit(0 if ok else 1)"
schema=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/doctor/schema/doctor-report.schema.json
"$pf" "${doc[@]}" --modes L0,L3 --no-per-transform --json "$work/doctor-some.json" >/dev/null 2>&1
py=/usr/bin/python3  # Debian's, which scripts/install-deps.sh gives python3-jsonschema
[[ -x $py ]] || py=python3
check "doctor JSON reports follow the published schema" "$py" -c "
import json, sys, jsonschema
schema = json.load(open('$schema'))
jsonschema.Draft202012Validator.check_schema(schema)
for f in ('$work/doctor.json', '$work/doctor-some.json'):
    jsonschema.Draft202012Validator(schema).validate(json.load(open(f)))
bad = json.load(open('$work/doctor.json')); bad['modes'][0]['consumer_wait'] = 1.5
sys.exit(0 if not jsonschema.Draft202012Validator(schema).is_valid(bad) else 1)"
"$pf" "${doc[@]}" --modes L0,L3 --no-per-transform --no-verify --html "$work/doctor.html" --json "$work/doctor-page.json" \
  >"$work/doctor-page.txt" 2>"$work/doctor-page.err"
check "doctor --html writes one self-contained page with the verdict, the charts and the command" python3 -c "
import json,sys; r=json.load(open('$work/doctor-page.json')); p=open('$work/doctor.html').read()
esc = lambda t: t.replace('&','&amp;').replace('<','&lt;').replace('>','&gt;').replace('\"','&quot;').replace(\"'\",'&#39;')
ok = p.startswith('<!DOCTYPE html>') and ('<p id=\"verdict-text\">'+esc(r['verdict'])+'</p>') in p
ok = ok and 'id=\"chart-ladder\"' in p and 'id=\"chart-stages\"' in p and 'id=\"chart-wait-l0\"' in p
ok = ok and '<script' not in p and 'src=\"' not in p and '--no-verify' in r['command'] and r['command'].split()[1]=='doctor'
ok = ok and not r['verified'] and any(f['name']=='CPU' for f in r['machine'])
sys.exit(0 if ok else 1)"
check "doctor --html says where the page went" grep -q "the report as a page written to $work/doctor.html" "$work/doctor-page.err"
check "doctor --no-verify: no suggestion was run" python3 -c "
import json,sys; r=json.load(open('$work/doctor-page.json'))
sys.exit(0 if all(not s['measured'] and s['trial'] is None for s in r['suggestions'] + r['no_gain']) and not r['no_gain'] else 1)"
check "doctor JSON without the suggestions' runs follows the schema" "$py" -c "
import json, jsonschema
jsonschema.Draft202012Validator(json.load(open('$schema'))).validate(json.load(open('$work/doctor-page.json')))"
"$pf" "${doc[@]}" --modes L0 --no-per-transform --trace-mode "shards:http://user:secret@h.example/x-{0..1}.tar?X-Amz-Signature=abc" \
  --json "$work/doctor-redacted.json" >/dev/null 2>&1
check "doctor's recorded command shows locations without credentials or query" python3 -c "
import json,sys; c=json.load(open('$work/doctor-redacted.json'))['command']
sys.exit(0 if 'h.example/x-{0..1}.tar' in c and 'secret' not in c and 'Signature' not in c else 1)"
expect_error "doctor --html to a bad path" "cannot write the page to '/nonexistent/dir/r.html'" "${doc[@]}" --modes L0 --html /nonexistent/dir/r.html
check "doctor trace is a Chrome trace" python3 -c "
import json,sys; t=json.load(open('$work/doctor-trace.json')); sys.exit(0 if t['traceEvents'] else 1)"
expect_error "doctor: negative step" "step time must be a finite number >= 0 ms, got -2" "${doc[@]}" --step-ms -2
expect_error "doctor: pool larger than dataset" "cache pool of 100 samples is larger than the dataset (64 samples)" "${doc[@]}" --pool 100
expect_error "doctor: unknown option" "--frobnicate" "${doc[@]}" --frobnicate 3
expect_error "doctor: unknown mode" "unknown mode 'L7'" "${doc[@]}" --modes L0,L7
expect_error "doctor: slow-link emulation without a GPU" "nothing is copied" "${doc[@]}" --copy-bandwidth-mb-s 10
expect_error "doctor: bad transform" "bogus" doctor --transforms "crop(8),bogus"
mkdir -p "$work/bad/a" && for i in 1 2 3; do echo "no image" >"$work/bad/a/x$i.jpg"; done
expect_error "doctor: dataset that fails to decode" "x1.jpg" doctor --source "folder:$work/bad" --transforms "rrc(16)" --device cpu --batch 2 --steps 2
expect_error "doctor: skip with nothing good" "every one of the 3 samples failed" doctor --source "folder:$work/bad" --transforms "rrc(16)" --device cpu --batch 2 --steps 2 --on-error skip

# Settings: auto by default, bad values named, the doctor's config read back by run.
"$pf" bench autotune --data "$work/bench-data" --images 40 --synthetic-samples 16 --workloads synthetic,jpeg_folder \
  --batch 4 --epochs 1 --rounds 2 --workers 1 --prefetch 1,2 >"$work/autotune.jsonl" 2>"$work/autotune.err"
check "bench autotune: the grid, auto and a summary per workload, with the CPU model" python3 -c "
import json,sys; rows=[json.loads(l) for l in open('$work/autotune.jsonl')]
for w in ('synthetic_article','jpeg_folder_rrc_flip'):
    mine=[r for r in rows if r['workload']==w]
    grid=[r for r in mine if r.get('setting')=='grid']; auto=[r for r in mine if r.get('setting')=='auto']; s=[r for r in mine if r.get('summary')]
    assert len(grid)==2 and {r['prefetch'] for r in grid}=={1,2} and len(auto)==1 and len(s)==1, w
    assert all(len(r['rounds_images_per_s'])==2 and r['images_per_s']>0 and r['cpu'] for r in grid+auto), w
    best=max(r['images_per_s'] for r in grid)
    assert abs(s[0]['best_images_per_s']-best)<1e-9 and abs(s[0]['auto_over_best']-auto[0]['images_per_s']/best)<1e-9, w
    assert auto[0]['chose_workers']>=1 and auto[0]['chose_prefetch']>=1, w"
expect_error "bench autotune: an unknown workload is named" "unknown workload 'gpu'" bench autotune --workloads gpu
expect_error "run --workers 0 names the value" "--workers 0: give a whole number from 1 to 1024, or auto" run --device cpu --samples 64 --limit 1 --workers 0
expect_error "run --prefetch -1 names the value" "--prefetch -1: give a whole number from 1 to 4095, or auto" run --device cpu --samples 64 --limit 1 --prefetch -1
expect_error "doctor --workers many names the value" "--workers many" "${doc[@]}" --workers many
"$pf" run --device cpu --samples 256 --height 64 --width 64 --epochs 2 --json "$work/auto.json" >/dev/null 2>"$work/auto.err"
check "run tunes workers and prefetch by default and reports it" python3 -c "
import json,sys; t=json.load(open('$work/auto.json'))['tuning']
sys.exit(0 if t['workers_auto'] and t['prefetch_auto'] and 1<=t['workers']<=t['workers_most'] and 1<=t['prefetch']<=t['prefetch_most']<=8 else 1)"
check "run prints the settings it ran with" grep -q "^settings: workers [0-9]* (auto, of [0-9]*), prefetch" "$work/auto.err"
"$pf" "${doc[@]}" --modes L0,L3 --no-per-transform --max-mode-seconds 1 --write-config "$work/config.json" \
  --json "$work/doctor-config.json" >"$work/doctor-config.txt" 2>&1
check "doctor --write-config writes the tuned settings and the speed-up it measured" python3 -c "
import json,sys; c=json.load(open('$work/config.json')); r=json.load(open('$work/doctor-config.json'))
ok = c['schema']=='pinfeed.config/1' and c['workers']==r['tuning']['workers'] and c['prefetch']==r['tuning']['prefetch']
ok = ok and c['expected_speedup']>0 and abs(c['expected_speedup']-r['comparison']['expected_speedup'])<1e-9
sys.exit(0 if ok else 1)"
check "doctor report says the expected speed-up" grep -q "^expected speed-up [0-9.]*x: the full pipeline ran" "$work/doctor-config.txt"
check "doctor JSON with tuning follows the schema" "$py" -c "
import json, jsonschema
jsonschema.Draft202012Validator(json.load(open('$schema'))).validate(json.load(open('$work/doctor-config.json')))"
"$pf" run --device cpu --samples 64 --height 64 --width 64 --limit 2 --config "$work/config.json" 2>"$work/config-run.err" >/dev/null
check "run --config runs the written settings, fixed" grep -q "^settings: workers [0-9]* (fixed), prefetch [0-9]* (fixed)" "$work/config-run.err"
echo '{"schema": "pinfeed.config/1", "workers": 40}' >"$work/many-config.json"
"$pf" run --device cpu --samples 64 --height 16 --width 16 --limit 2 --config "$work/many-config.json" 2>"$work/many-run.err" >/dev/null
check "run --config: the file's workers raise TBB's cap as --workers does" grep -q "^settings: workers 40 (fixed)" "$work/many-run.err"
echo '{"schema": "pinfeed.config/1", "workers": 0}' >"$work/bad-config.json"
expect_error "run --config with a bad value names the file, field and value" "bad-config.json': \"workers\" is 0, expected a whole number from 1 to 1024" run --device cpu --samples 64 --limit 1 --config "$work/bad-config.json"
expect_error "run --config with a missing file names it" "cannot read config '$work/none.json'" run --device cpu --samples 64 --limit 1 --config "$work/none.json"

# preview draws what run delivers: its tiles equal the batch run --save-batches writes, sample for
# sample (the same streams), and its PNG is a grid of that size, not blank.
aug="rrc(40),hflip,trivial_augment,color_jitter(0.4,0.4,0.4,0.1),random_erasing(0.5)"
"$pf" run --device cpu --samples 64 --height 70 --width 90 --transforms "$aug" --batch 7 --limit 2 --workers 2 --seed 5 \
  --save-batches "$work/saved" >/dev/null 2>"$work/saved.err"
check "run --save-batches writes each batch's fields as .npy" test -s "$work/saved/000001.image.npy" -a -s "$work/saved/000001.label.npy" \
  -a ! -e "$work/saved/000002.image.npy"
# A batch op ends the pipeline: the saved labels are soft, float32 [batch, num_classes], rows summing to 1.
mix="rrc(24),normalize(0.485,0.456,0.406,0.229,0.224,0.225),mixup_cutmix(0.8,1,num_classes=1000)"
"$pf" run --device cpu --samples 64 --height 40 --width 40 --transforms "$mix" --batch 8 --limit 2 --workers 2 --seed 5 \
  --save-batches "$work/mixed" >/dev/null 2>"$work/mixed.err"
check "run with mixup_cutmix saves soft labels, float32 [8, 1000], each row summing to 1" python3 - "$work/mixed/000001.label.npy" <<'PY'
import struct, sys
npy = open(sys.argv[1], "rb").read()
n = struct.unpack("<H", npy[8:10])[0]
header, data = npy[10:10 + n].decode(), npy[10 + n:]
assert "'<f4'" in header and "(8, 1000)" in header, header
rows = [struct.unpack("<1000f", data[r * 4000:(r + 1) * 4000]) for r in range(8)]
assert all(abs(sum(r) - 1.0) <= 1e-6 for r in rows), [sum(r) for r in rows]
assert any(sorted(r)[-2] > 0 for r in rows)  # some rows weigh two labels
PY
check "preview leaves the batch op and the normalize out: a sheet of the samples" "$pf" preview --source synthetic --height 40 \
  --width 40 --transforms "$mix" --samples 4 --seed 5 --out "$work/mixed.png"
expect_error "a batch op without num_classes on a source that has no class count names it" "num_classes is unknown" run --device cpu \
  --samples 8 --height 16 --width 16 --limit 1 --transforms "rrc(8),scale,mixup(0.2)"
expect_error "a batch op before another step is refused" "must be the pipeline's last step" run --device cpu --samples 8 --height 16 \
  --width 16 --limit 1 --transforms "rrc(8),scale,cutmix(1,num_classes=10),hflip"
"$pf" preview --source synthetic --height 70 --width 90 --transforms "$aug" --samples 7 --seed 5 --out "$work/sheet.png" \
  --explain >"$work/sheet.txt" 2>&1
check "preview --explain says what each step drew for each sample" bash -c "grep -c '^sample [0-6]: rrc(40' '$work/sheet.txt' | grep -qx 7"
check "preview's tiles are the batch run delivers, and its sheet a 3 x 3 grid of them" python3 - "$work/sheet.png" "$work/saved/000000.image.npy" <<'PY'
import struct, sys, zlib
png = open(sys.argv[1], "rb").read()
assert png[:8] == b"\x89PNG\r\n\x1a\n"
at, idat, w, h = 8, b"", 0, 0
while at < len(png):
    n, kind = struct.unpack(">I4s", png[at:at + 8])
    body = png[at + 8:at + 8 + n]
    if kind == b"IHDR":
        w, h, depth, colour = struct.unpack(">IIBB", body[:10])
        assert (depth, colour) == (8, 2)
    if kind == b"IDAT":
        idat += body
    at += 12 + n
raw = zlib.decompress(idat)
rows = [raw[y * (3 * w + 1) + 1:(y + 1) * (3 * w + 1)] for y in range(h)]
gap, label, tile = 4, 16, 40
assert (w, h) == (3 * (tile + gap) + gap, 3 * (tile + label + gap) + gap), (w, h)
npy = open(sys.argv[2], "rb").read()
header_len = struct.unpack("<H", npy[8:10])[0]
header, data = npy[10:10 + header_len].decode(), npy[10 + header_len:]
assert "'|u1'" in header and "(7, 40, 40, 3)" in header, header
for n in range(7):
    x0, y0 = gap + (n % 3) * (tile + gap), gap + (n // 3) * (tile + label + gap)
    for y in range(tile):
        got = rows[y0 + y][3 * x0:3 * (x0 + tile)]
        want = data[(n * tile + y) * tile * 3:(n * tile + y + 1) * tile * 3]
        assert got == want, (n, y)
assert len(set(raw)) > 16  # not blank
PY
expect_error "preview past the source's end says so" "samples 2046 to 2049 asked for; the source has 2048" preview \
  --source synthetic --samples 4 --first 2046 --transforms "rrc(8)" --out "$work/none.png" --height 16 --width 16
expect_error "run --save-batches into a file names it" "--save-batches: cannot make the folder" run --device cpu --samples 8 \
  --height 16 --width 16 --limit 1 --save-batches "$work/sheet.png"

echo "$fails failed"
exit $((fails > 0))
