#!/usr/bin/env python3
"""pinfeed.torch beside the same pipeline from C++ and beside the PyTorch DataLoader (comparison only).

One JPEG folder (crops of the photos scripts/fetch-photos.sh fetches, saved at quality 90), one
recipe (rrc(224), hflip, normalize), one batch size (256 by default), one worker count:
  - C++: `pinfeed run` over the folder (its samples/s, the loader's own counter);
  - Python: pinfeed.torch.Loader over the same folder and recipe, each batch turned into torch
    tensors by DLPack (the loader's same counter, read through stats());
  - the DataLoader: torchvision's ImageFolder with the same transforms (v2), the same workers
    and batch size (images/s over timed epochs after a warm-up one).
Rounds alternate the three; each figure is the median of the rounds'. The Python layer's cost is
1 - python / C++.

Usage: python_torch.py --pinfeed PATH [--photos DIR] [--data DIR] [--images 1024] [--workers N]
                       [--batch 256] [--epochs 3] [--rounds 3] [--json FILE]
Needs the module: PYTHONPATH=build/python (built with -DPINFEED_PYTHON=ON).
"""
import argparse
import json
import os
import platform
import subprocess
import tempfile

import torch
import torchvision
from torchvision.datasets import ImageFolder
from torchvision.transforms import v2

import pinfeed
import pinfeed.torch
from common import cpu_model, dataloader_images_per_s, make_folder, median_of, write_jsonl

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
RECIPE = "rrc(224),hflip,normalize(0.485,0.456,0.406,0.229,0.224,0.225)"


def cpp_samples_per_s(pf, folder, workers, batch, epochs):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([pf, "run", "--source", "folder:" + folder, "--transforms", RECIPE, "-b", str(batch), "-w", str(workers),
                        "--epochs", str(epochs), "--shuffle", "--device", "cpu", "--json", f.name], check=True, capture_output=True,
                       env=dict(os.environ, PINFEED_LOG_LEVEL="warn"))
        d = json.load(open(f.name))
    return d["samples_per_s"], cpu_model()


def python_samples_per_s(folder, workers, batch, epochs):
    loader = pinfeed.torch.Loader(pinfeed.image_folder(folder, RECIPE), batch_size=batch, workers=workers, shuffle=True,
                                  device="cpu")
    for e in range(epochs):
        loader.set_epoch(e)
        for b in loader:
            b["image"].shape  # the tensors made (by DLPack), as a training loop gets them
    rate = loader.stats()["samples_per_s"]
    loader.close()
    return rate


def folder_dataloader_images_per_s(folder, workers, batch, epochs):
    tf = v2.Compose([v2.PILToTensor(), v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip(),
                     v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])
    return dataloader_images_per_s(ImageFolder(folder, transform=tf), workers, batch, epochs)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pinfeed", required=True)
    ap.add_argument("--photos", default=".venv-test/photos")
    ap.add_argument("--data", default="build/bench-data/python")
    ap.add_argument("--images", type=int, default=1024)
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    make_folder(a.photos, a.data, a.images)
    torch.set_num_threads(1)
    cpp, py, dl = [], [], []
    cpu = None
    for _ in range(a.rounds):
        rate, cpu = cpp_samples_per_s(a.pinfeed, a.data, a.workers, a.batch, a.epochs)
        cpp.append(rate)
        py.append(python_samples_per_s(a.data, a.workers, a.batch, a.epochs))
        dl.append(folder_dataloader_images_per_s(a.data, a.workers, a.batch, a.epochs))
    c, p, d = median_of(cpp), median_of(py), median_of(dl)
    row = {"bench": "python_compare", "transforms": RECIPE, "images": a.images, "workers": a.workers, "batch": a.batch,
           "epochs": a.epochs, "rounds": a.rounds, "cpp_images_per_s": c, "python_images_per_s": p, "dataloader_images_per_s": d,
           "python_over_cpp": p / c, "python_layer_cost": 1 - p / c, "python_over_dataloader": p / d, "cpu": cpu,
           "cpp_rounds": cpp, "python_rounds": py, "dataloader_rounds": dl, "torch": torch.__version__,
           "torchvision": torchvision.__version__, "pinfeed": pinfeed.__version__, "python": platform.python_version()}
    print(json.dumps(row))
    write_jsonl(a.json, [row])


if __name__ == "__main__":
    main()
