#!/usr/bin/env python3
"""pinfeed beside the PyTorch DataLoader and NVIDIA DALI's CPU pipeline on one JPEG folder
(comparison only). One folder (crops of the photos scripts/fetch-photos.sh fetches, saved at
quality 90), one recipe: a random resized crop to 224x224 and a random horizontal flip, uint8 out;
the same worker count, batch size and epochs for all three:
  - pinfeed: `pinfeed run --transforms rrc(224),hflip` over one warm-up epoch and `epochs` timed
    ones, the median of the timed epochs' samples/s (`--json`'s "epochs"); the crop's window
    decoded with DCT scaling where the window allows, pinfeed's Huffman decoder;
  - the DataLoader: torchvision's ImageFolder with v2 RandomResizedCrop(224) + RandomHorizontalFlip
    (PIL decodes the whole image), images/s over timed epochs after a warm-up one;
  - DALI: decoders.image_random_crop on the CPU (libjpeg-turbo decodes the window only), resize,
    flip (dali_cpu.py, in its own virtualenv), the same way.
Rounds alternate the three; each figure is the median of the rounds'.

Usage: jpeg_torch_dali.py --pinfeed PATH --dali-python PATH [--photos DIR] [--data DIR] [--images 2048]
                          [--workers N] [--batch 256] [--epochs 3] [--rounds 5] [--json FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
import torchvision
from torchvision.datasets import ImageFolder
from torchvision.transforms import v2

from common import cpu_model, dataloader_images_per_s, make_folder, median_of, write_jsonl

RECIPE = "rrc(224),hflip"


def pinfeed_images_per_s(pf, folder, workers, batch, epochs):
    """A warm-up epoch, then the median samples/s of `epochs` timed ones, as for the other two."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([pf, "run", "--source", "folder:" + folder, "--transforms", RECIPE, "-b", str(batch), "-w", str(workers),
                        "--epochs", str(epochs + 1), "--shuffle", "--device", "cpu", "--json", f.name], check=True,
                       capture_output=True, env=dict(os.environ, PINFEED_LOG_LEVEL="warn"))
        per_epoch = json.load(open(f.name))["epochs"]
        if len(per_epoch) != epochs + 1:
            sys.exit("pinfeed run gave %d epochs' figures, not %d" % (len(per_epoch), epochs + 1))
        return median_of([e["samples_per_s"] for e in per_epoch[1:]])


def dataloader_rate(folder, workers, batch, epochs):
    tf = v2.Compose([v2.PILToTensor(), v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip()])
    return dataloader_images_per_s(ImageFolder(folder, transform=tf), workers, batch, epochs)


def dali_rate(python, folder, workers, batch, epochs):
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dali_cpu.py")
    out = subprocess.run([python, script, folder, "--threads", str(workers), "--batch", str(batch), "--epochs", str(epochs)],
                         check=True, capture_output=True, text=True).stdout
    row = json.loads(out.strip().splitlines()[-1])
    return row["images_per_s"], row["dali"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pinfeed", required=True)
    ap.add_argument("--dali-python", required=True, help="a Python with nvidia-dali (run_dali_compare.sh makes one)")
    ap.add_argument("--photos", default=".venv-test/photos")
    ap.add_argument("--data", default="build/bench-data/python")
    ap.add_argument("--images", type=int, default=2048)
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    make_folder(a.photos, a.data, a.images)
    torch.set_num_threads(1)  # DataLoader workers each get one thread, as pinfeed's workers and DALI's threads do
    mine, dl, dali = [], [], []
    dali_version = None
    for r in range(a.rounds):
        order = [0, 1, 2] if r % 2 == 0 else [2, 1, 0]
        for k in order:
            if k == 0:
                mine.append(pinfeed_images_per_s(a.pinfeed, a.data, a.workers, a.batch, a.epochs))
            elif k == 1:
                dl.append(dataloader_rate(a.data, a.workers, a.batch, a.epochs))
            else:
                rate, dali_version = dali_rate(a.dali_python, a.data, a.workers, a.batch, a.epochs)
                dali.append(rate)
    p, d, n = median_of(mine), median_of(dl), median_of(dali)
    row = {"bench": "jpeg_compare", "transforms": RECIPE, "images": a.images, "workers": a.workers, "batch": a.batch,
           "epochs": a.epochs, "rounds": a.rounds, "pinfeed_images_per_s": p, "dataloader_images_per_s": d,
           "dali_images_per_s": n, "pinfeed_over_dataloader": p / d, "pinfeed_over_dali": p / n, "cpu": cpu_model(),
           "pinfeed_rounds": mine, "dataloader_rounds": dl, "dali_rounds": dali, "torch": torch.__version__,
           "torchvision": torchvision.__version__, "dali": dali_version}
    print(json.dumps(row))
    write_jsonl(a.json, [row])


if __name__ == "__main__":
    sys.exit(main())
