#!/usr/bin/env python3
"""The balanced sampler in PyTorch, as the source article writes it, timed on the sizes of
`pinfeed bench sampler`, and printed side by side with pinfeed's figures.

  sample_data      the article's first version: nonzero -> randperm -> cat -> randperm -> gather
                   (host-device sync on a GPU); batches run it in a Python loop over rows
  opt_sample_data  the article's static version: count_nonzero, masked random keys, topk, gather;
                   batched natively over rows
  compiled         opt_sample_data under torch.compile (GPU only: the article's compiled case)

Usage: sampler_torch.py (--pinfeed PATH/TO/pinfeed | --pinfeed-jsonl ROWS.jsonl) [--device cpu|cuda] [--sizes ...] [--rows 32]
                        [--rounds 3] [--simd all]
With --pinfeed, each size runs in rounds (pinfeed's rows, then torch's); a ratio is the median of
the rounds' ratios, printed with each round's. --pinfeed-jsonl has one round of pinfeed figures.
PyTorch is a comparison-only dependency: run_sampler_compare.sh installs it in a virtualenv.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

from common import append_jsonl, median_of, pinfeed_rows


def sample_data(inp, labels, k):
    device = labels.device
    positive = torch.nonzero(labels == 1, as_tuple=True)[0]
    negative = torch.nonzero(labels == 0, as_tuple=True)[0]
    half = k // 2
    num_pos = min(positive.numel(), half)
    num_neg = min(negative.numel(), half)
    if num_neg < half:
        num_pos = k - num_neg
    elif num_pos < half:
        num_neg = k - num_pos
    perm1 = torch.randperm(positive.numel(), device=device)[:num_pos]
    perm2 = torch.randperm(negative.numel(), device=device)[:num_neg]
    idx = torch.cat([positive[perm1], negative[perm2]], dim=0)
    idx = idx[torch.randperm(idx.numel(), device=device)]
    return inp[idx], labels[idx]


def batched_sample_data(inputs, labels, k):
    outs = [sample_data(inputs[i], labels[i], k) for i in range(inputs.size(0))]
    return torch.stack([o[0] for o in outs]), torch.stack([o[1] for o in outs])


def opt_sample_data(inp, labels, k):
    pos_mask = labels == 1
    neg_mask = labels == 0
    num_pos_idxs = torch.count_nonzero(pos_mask, dim=-1)
    num_neg_idxs = torch.count_nonzero(neg_mask, dim=-1)
    half = labels.new_full((), k // 2)
    num_pos = torch.minimum(num_pos_idxs, half)
    num_neg = torch.minimum(num_neg_idxs, half)
    num_pos = torch.where(num_neg < k // 2, k - num_neg, num_pos)
    num_neg = k - num_pos
    rand = torch.rand_like(labels, dtype=torch.float32)
    pos_rand = torch.where(pos_mask, rand, -1)
    neg_rand = torch.where(neg_mask, rand, -1)
    top_pos_rand, top_pos_idx = torch.topk(pos_rand, k=k)
    arange = torch.arange(k, device=labels.device)
    if num_pos.numel() > 1:
        arange = arange.unsqueeze(0)
        num_pos = num_pos.unsqueeze(-1)
        num_neg = num_neg.unsqueeze(-1)
    top_pos_rand = torch.where(arange >= num_pos, -1, top_pos_rand)
    top_neg_rand, top_neg_idx = torch.topk(neg_rand, k=k)
    top_neg_rand = torch.where(arange >= num_neg, -1, top_neg_rand)
    cat_rand = torch.cat([top_pos_rand, top_neg_rand], dim=-1)
    cat_idx = torch.cat([top_pos_idx, top_neg_idx], dim=-1)
    topk_rand_idx = torch.topk(cat_rand, k=k)[1]
    sampled = torch.gather(cat_idx, dim=-1, index=topk_rand_idx)
    # The article gathers index.unsqueeze(-1) (one feature column); gather all D, as pinfeed does.
    gidx = sampled.unsqueeze(-1).expand(*sampled.shape, inp.size(-1))
    return torch.gather(inp, dim=-2, index=gidx), torch.gather(labels, dim=-1, index=sampled)


def measure(fn, sync, repeats, min_ms):
    fn(); sync()
    t0 = time.perf_counter(); fn(); sync()
    once = (time.perf_counter() - t0) * 1e3
    inner = max(1, int(min_ms / max(once, 1e-3)))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        samples.append((time.perf_counter() - t0) * 1e3 / inner)
    samples.sort()
    return statistics.median(samples)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pinfeed", help="pinfeed executable: runs `pinfeed bench sampler` for pinfeed's rows")
    ap.add_argument("--pinfeed-jsonl", help="pinfeed's rows from an earlier `pinfeed bench sampler` run instead")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000, 1000000])
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--features", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3,
                    help="interleaved rounds per size (pinfeed, then torch); ratios are the median of the rounds'")
    ap.add_argument("--min-sample-ms", type=float, default=20.0)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--json", help="also write every row as JSON lines to this file")
    ap.add_argument("--compile-sizes", type=int, nargs="+",
                    help="torch.compile only at these N (default: every size); a cold compile takes "
                         "tens of seconds a shape")
    ap.add_argument("--simd", nargs="+", default=[],
                    help="pinfeed's CPU rows at these SIMD levels (scalar avx2 avx512, or all), each against the same torch figures")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    file_rows = []
    if a.pinfeed_jsonl:
        with open(a.pinfeed_jsonl) as f:
            file_rows = [json.loads(line) for line in f if line.startswith("{")]
    elif not a.pinfeed:
        ap.error("give --pinfeed or --pinfeed-jsonl")
    # Rounds: pinfeed's rows for one size, then torch's for the same size, R times, so that both
    # sides of a ratio run within seconds of each other; each ratio is the median of the rounds'
    # ratios, and each time the median of the rounds' medians (a host's slow phase then moves both
    # sides of one round, not one side of every ratio).
    def pinfeed_for(n):
        if a.pinfeed_jsonl:
            return [r for r in file_rows if r.get("N") == n]
        cmd = [a.pinfeed, "bench", "sampler", "--device", a.device, "--rows", str(a.rows), "--features",
               str(a.features), "--repeats", str(a.repeats), "--max-cpu-n", str(n), "--sizes", str(n)]
        if a.simd:
            cmd += ["--simd", *a.simd]
        return pinfeed_rows(cmd)

    def mine_of(rows):
        return [r for r in rows if "impl" in r and r.get("device", a.device) == a.device]

    header_done = False
    for n in a.sizes:
        k = n // 10
        rounds = []  # per round: (pinfeed times by (impl, B, N, level), torch times by B)
        for _ in range(1 if a.pinfeed_jsonl else a.rounds):
            mine_rows = mine_of(pinfeed_for(n))
            ours = {(r["impl"], r["B"], r["N"], r.get("simd", "-")): r["median_ms"] for r in mine_rows}
            theirs = {}
            for b in (1, a.rows):
                labels = torch.randint(0, 2, (b, n), device=dev, dtype=torch.int64)
                inputs = torch.randn((b, n, a.features), device=dev)
                if b == 1:
                    l1, i1 = labels[0], inputs[0]
                    loop = measure(lambda: sample_data(i1, l1, k), sync, a.repeats, a.min_sample_ms)
                    static = measure(lambda: opt_sample_data(i1, l1, k), sync, a.repeats, a.min_sample_ms)
                else:
                    loop = measure(lambda: batched_sample_data(inputs, labels, k), sync, a.repeats, a.min_sample_ms)
                    static = measure(lambda: opt_sample_data(inputs, labels, k), sync, a.repeats, a.min_sample_ms)
                compiled = None
                if a.device == "cuda" and (a.compile_sizes is None or n in a.compile_sizes):
                    fn = torch.compile(opt_sample_data)
                    li, ii = (labels[0], inputs[0]) if b == 1 else (labels, inputs)
                    compiled = measure(lambda: fn(ii, li, k), sync, a.repeats, a.min_sample_ms)
                theirs[b] = (loop, static, compiled)
            rounds.append((mine_rows, ours, theirs))
        mine_rows = rounds[0][0]
        levels = list(dict.fromkeys(r.get("simd", "-") for r in mine_rows)) or ["-"]
        host = next((r for r in mine_rows if "cpu" in r), {})
        if not header_done:
            header_done = True
            print(f"# torch {torch.__version__}, device {a.device}, {a.threads} threads; K = N/10, D = {a.features}; "
                  f"median ms per call, median of {len(rounds)} interleaved rounds; CPU {host.get('cpu', '?')}, "
                  f"{host.get('compiler', '?')}, {host.get('build_type', '?')}")
            print(f"{'N':>9} {'B':>3} | {'torch loop':>10} {'torch static':>12} {'torch compiled':>14} | {'simd':>6} "
                  f"{'pinfeed':>9} {'floor':>8} | {'best torch / pinfeed':>20} {'pinfeed / floor':>15} | rounds")

        for b in (1, a.rows):
            loop = median_of([t[b][0] for _, _, t in rounds])
            static = median_of([t[b][1] for _, _, t in rounds])
            compiled = median_of([t[b][2] for _, _, t in rounds])
            for level in levels:
                impl = "static_single" if b == 1 else "batched"
                if a.device == "cuda" and ("graph", b, n, level) in rounds[0][1]:
                    impl = "graph"
                per_round = []
                for _, ours, t in rounds:
                    mine_r = ours.get((impl, b, n, level))
                    best_r = min(x for x in t[b] if x is not None)
                    per_round.append(best_r / mine_r if mine_r else float("nan"))
                mine = median_of([o.get((impl, b, n, level)) for _, o, _ in rounds])
                floor = median_of([o.get(("floor", b, n, level)) for _, o, _ in rounds])
                ratio = median_of(per_round, float("nan"))
                vs_floor = mine / floor if mine and floor else float("nan")
                comp = f"{compiled:14.3f}" if compiled is not None else f"{'-':>14}"
                spread = " ".join(f"{x:.1f}" for x in per_round)
                print(f"{n:>9} {b:>3} | {loop:10.3f} {static:12.3f} {comp} | {level:>6} {mine or float('nan'):9.3f} "
                      f"{floor or float('nan'):8.3f} | {ratio:19.1f}x {vs_floor:14.1f}x | {spread}", flush=True)
                row = {"N": n, "B": b, "K": k, "D": a.features, "device": a.device, "torch": torch.__version__,
                       "torch_threads": a.threads, "torch_loop_ms": loop, "torch_static_ms": static,
                       "torch_compiled_ms": compiled, "pinfeed_impl": impl, "pinfeed_ms": mine, "floor_ms": floor,
                       "best_torch_over_pinfeed": ratio, "ratio_per_round": per_round, "rounds": len(rounds),
                       "pinfeed_over_floor": vs_floor, "simd": level,
                       "cpu": host.get("cpu"), "compiler": host.get("compiler"), "build_type": host.get("build_type")}
                append_jsonl(a.json, row)  # row by row: a run cut short keeps what it measured


if __name__ == "__main__":
    sys.exit(main())
