#!/usr/bin/env python3
"""pinfeed with workers and prefetch on auto against the PyTorch DataLoader configured as its docs
suggest (num_workers = the cores, pin_memory=True, shuffle, persistent workers, its default
prefetch_factor), on the same data: the article's synthetic pipeline and a JPEG folder through
RandomResizedCrop(224) + flip. Both sides run one untimed epoch, then --epochs timed; rounds
interleave them, and a ratio is the median of the rounds'.

Usage: autotune_torch.py --pinfeed PATH [--data DIR] [--images N] [--rounds 3] [--epochs 2] [--json FILE]
"""
import argparse
import os
import sys
import time

import torch
import torchvision.transforms as T
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder

from common import median_of, pinfeed_rows, write_jsonl
from pipeline_torch import ConvertColor, FakeDataset, RandomMask, Scale


def images_per_s(dataset, batch, epochs):
    cores = os.cpu_count()
    loader = DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=cores,
                        pin_memory=torch.cuda.is_available(), persistent_workers=True)
    images, seconds = 0, 0.0
    for e in range(epochs + 1):
        t0 = time.perf_counter()
        n = sum(len(b[1]) for b in loader)
        if e > 0:
            seconds += time.perf_counter() - t0
            images += n
    return images / seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pinfeed", required=True)
    ap.add_argument("--data", default="/tmp/pinfeed-bench-data")
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--synthetic-samples", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(1)  # each DataLoader worker one thread, as each pinfeed worker
    # pinfeed's auto rows alone: a one-setting grid (1 worker, prefetch 2) beside them.
    cmd = [a.pinfeed, "bench", "autotune", "--workloads", "synthetic,jpeg_folder", "--data", a.data, "--images",
           str(a.images), "--synthetic-samples", str(a.synthetic_samples), "--batch", str(a.batch), "--epochs",
           str(a.epochs), "--rounds", "1", "--workers", "1", "--prefetch", "2"]
    article = T.Compose([T.PILToTensor(), T.RandomCrop(256), RandomMask(), ConvertColor(), Scale()])
    rrc = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor()])
    names = {"synthetic_article": None, "jpeg_folder_rrc_flip": None}
    rounds, host = [], {}
    for _ in range(a.rounds):
        rows = pinfeed_rows(cmd)  # also writes the data set on the first round
        ours = {r["workload"]: r for r in rows if r.get("setting") == "auto"}
        host = {k: rows[0][k] for k in ("cpu", "simd", "compiler", "build_type")}
        theirs = {
            "synthetic_article": images_per_s(FakeDataset(a.synthetic_samples, article), a.batch, a.epochs),
            "jpeg_folder_rrc_flip": images_per_s(ImageFolder(os.path.join(a.data, "jpeg"), transform=rrc), a.batch, a.epochs),
        }
        rounds.append((ours, theirs))
    out = []
    print(f"{'workload':<22} {'DataLoader':>11} {'pinfeed auto':>13} {'auto / DataLoader':>18} | chose")
    for name in names:
        mine = [r[0][name]["images_per_s"] for r in rounds]
        base = [r[1][name] for r in rounds]
        ratio = median_of([m / b for m, b in zip(mine, base)])
        chose = rounds[-1][0][name]
        print(f"{name:<22} {median_of(base):>11.1f} {median_of(mine):>13.1f} {ratio:>17.2f}x | "
              f"workers {chose['chose_workers']}, prefetch {chose['chose_prefetch']}")
        out.append({"bench": "autotune_vs_dataloader", "workload": name, "dataloader_workers": os.cpu_count(),
                    "dataloader_pin_memory": torch.cuda.is_available(), "dataloader_images_per_s": median_of(base),
                    "pinfeed_auto_images_per_s": median_of(mine), "auto_over_dataloader": ratio,
                    "rounds_dataloader": base, "rounds_pinfeed_auto": mine, "chose_workers": chose["chose_workers"],
                    "chose_prefetch": chose["chose_prefetch"], "batch": a.batch, "epochs": a.epochs, **host})
    write_jsonl(a.json, out)


if __name__ == "__main__":
    sys.exit(main())
