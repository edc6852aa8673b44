#!/usr/bin/env python3
"""The workloads of `pinfeed bench pipeline` in the PyTorch DataLoader, side by side with pinfeed:
(a) the article's synthetic pipeline (random 1024x1024 image -> RandomCrop(256) -> RandomMask(0.25)
-> ConvertColor -> Scale, as the article writes it), (b) a JPEG ImageFolder and (c) the same JPEGs in
tar shards, both through RandomResizedCrop(224) + RandomHorizontalFlip to uint8 tensors. Same number
of DataLoader workers as pinfeed threads, same batch size, same images.

Usage: pipeline_torch.py --pinfeed PATH [--data DIR] [--workers N] [--images N] [--rounds 3] [--json FILE]
Each round runs pinfeed's bench, then the DataLoader's workloads; a ratio is the median of the rounds'.
"""
import argparse
import io
import os
import statistics
import sys
import tarfile
import time

import numpy as np
import torch

from common import median_of, pinfeed_rows, write_jsonl
import torchvision.transforms as T
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision.datasets import ImageFolder


class FakeDataset(Dataset):  # the article's dataset
    def __init__(self, size, transform):
        self.size, self.transform = size, transform

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        img = Image.fromarray(np.random.randint(0, 256, size=(1024, 1024, 3), dtype=np.uint8))
        return self.transform(img), np.random.randint(0, 1000)


class RandomMask(torch.nn.Module):  # the article's transform, its scipy dilation done with numpy
    def __init__(self, ratio=0.25):
        super().__init__()
        self.ratio = ratio

    def forward(self, img):
        mask = np.random.uniform(size=img.shape[-2:]) < self.ratio
        d = mask.copy()
        d[1:, :] |= mask[:-1, :]
        d[:-1, :] |= mask[1:, :]
        d[:, 1:] |= mask[:, :-1]
        d[:, :-1] |= mask[:, 1:]
        img[torch.from_numpy(d).unsqueeze(0).expand(3, -1, -1)] = 0
        return img


class ConvertColor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.A = torch.tensor([[0.299, 0.587, 0.114], [-0.16874, -0.33126, 0.5], [0.5, -0.41869, -0.08131]])
        self.b = torch.tensor([0., 128., 128.])

    def forward(self, img):
        img = img.to(dtype=torch.get_default_dtype())
        img = torch.matmul(self.A, img.view([3, -1])).view(img.shape)
        return img + self.b[:, None, None]


class Scale:
    def __call__(self, img):
        return img.to(dtype=torch.get_default_dtype()).div(255)


class TarShards(Dataset):
    """Map-style dataset over WebDataset-layout tar shards (key.jpg + key.cls)."""

    def __init__(self, paths, transform):
        self.transform, self.items, self.handles = transform, [], {}
        for p in paths:
            with tarfile.open(p) as t:
                members = {m.name: m for m in t.getmembers() if m.isfile()}
            for name, m in members.items():
                if name.endswith(".jpg"):
                    cls = members[name[:-4] + ".cls"]
                    self.items.append((p, m.offset_data, m.size, cls.offset_data, cls.size))

    def __len__(self):
        return len(self.items)

    def _read(self, path, offset, size):
        f = self.handles.get(path)
        if f is None:
            f = self.handles[path] = open(path, "rb")
        f.seek(offset)
        return f.read(size)

    def __getitem__(self, i):
        path, off, size, coff, csize = self.items[i]
        img = Image.open(io.BytesIO(self._read(path, off, size))).convert("RGB")
        return self.transform(img), int(self._read(path, coff, csize))


def epoch_seconds(dataset, workers, batch, repeats):
    loader = DataLoader(dataset, batch_size=batch, num_workers=workers, shuffle=False, persistent_workers=workers > 0)
    times = []
    for r in range(repeats + 1):
        t0 = time.perf_counter()
        for _ in loader:
            pass
        if r > 0:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pinfeed", required=True)
    ap.add_argument("--data", default="/tmp/pinfeed-bench-data")
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--synthetic-samples", type=int, default=256)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3,
                    help="interleaved rounds (pinfeed, then the DataLoader); ratios are the median of the rounds'")
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(1)  # DataLoader workers each get one thread, as pinfeed's workers do

    cmd = [a.pinfeed, "bench", "pipeline", "--data", a.data, "--images", str(a.images), "--synthetic-samples",
           str(a.synthetic_samples), "--workers", str(a.workers), "--batch", str(a.batch), "--repeats", str(a.repeats)]
    article = T.Compose([T.PILToTensor(), T.RandomCrop(256), RandomMask(), ConvertColor(), Scale()])
    rrc = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor()])

    # Rounds: pinfeed's bench, then the DataLoader's workloads, R times, so that both sides of a
    # ratio run within a minute of each other; each ratio is the median of the rounds' ratios.
    rounds = []  # per round: (pinfeed's images/s by workload, the DataLoader's by workload)
    host = {}
    for _ in range(a.rounds):
        mine_rows = pinfeed_rows(cmd)  # also writes the data set on the first round
        ours = {r["workload"]: r["images_per_s"] for r in mine_rows if "images_per_s" in r}
        # Every row says where and how it was measured (pinfeed's rows carry the host fields).
        host = {k: v for k, v in next((r for r in mine_rows if "cpu" in r), {}).items()
                if k in ("cpu", "simd", "compiler", "build_type")}
        host["torch"] = torch.__version__
        shards = sorted(os.path.join(a.data, "shards", f) for f in os.listdir(os.path.join(a.data, "shards"))
                        if f.endswith(".tar"))  # not the sidecar indexes (.tar.idx) beside them
        workloads = [
            ("synthetic_article", FakeDataset(a.synthetic_samples, article), a.synthetic_samples),
            ("jpeg_folder_rrc_flip", ImageFolder(os.path.join(a.data, "jpeg"), transform=rrc), a.images),
            ("jpeg_shards_rrc_flip", TarShards(shards, rrc), a.images),
        ]
        theirs = {name: n / epoch_seconds(ds, a.workers, a.batch, a.repeats) for name, ds, n in workloads}
        rounds.append((ours, theirs))

    print(f"# torch {torch.__version__}, DataLoader num_workers={a.workers}, batch {a.batch}; images/s (median of "
          f"{a.repeats} epochs; median of {len(rounds)} interleaved rounds); CPU {host.get('cpu', '?')}")
    print(f"{'workload':<24} {'DataLoader':>11} {'pinfeed':>9} {'pinfeed / DataLoader':>21} | rounds")
    rows = []
    for name in rounds[0][1]:
        per_round = [o.get(name, float("nan")) / t[name] for o, t in rounds]
        theirs = median_of([t[name] for _, t in rounds], float("nan"))
        mine = median_of([o.get(name, float("nan")) for o, _ in rounds], float("nan"))
        ratio = median_of(per_round, float("nan"))
        print(f"{name:<24} {theirs:11.1f} {mine:9.1f} {ratio:20.1f}x | " + " ".join(f"{x:.1f}" for x in per_round))
        rows.append({"workload": name, "workers": a.workers, "dataloader_images_per_s": theirs,
                     "pinfeed_images_per_s": mine, "ratio": ratio, "ratio_per_round": per_round,
                     "rounds": len(rounds), **host})
    for k in ("jpeg_folder_rrc_flip_1worker", "jpeg_folder_rrc_flip_1worker_libjpeg_huffman", "bare_decode_full",
              "bare_decode_full_pinfeed_huffman"):
        v = median_of([o.get(k, float("nan")) for o, _ in rounds], float("nan"))
        print(f"# pinfeed {k}: {v:.1f} images/s")
        rows.append({"workload": k, "workers": 1, "pinfeed_images_per_s": v, **host})
    write_jsonl(a.json, rows)


if __name__ == "__main__":
    sys.exit(main())
