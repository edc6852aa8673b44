#!/usr/bin/env python3
"""`pinfeed bench augment` beside torchvision v2 (comparison only):

(a) each op on one 224x224 RGB image, one thread each (torch.set_num_threads(1)): pinfeed's
    microseconds against torchvision.transforms.v2's on a uint8 CHW tensor;
(b) the recipe rrc(224), hflip, TrivialAugmentWide, normalize, RandomErasing(0.25) over the same
    JPEG folder: pinfeed's images/s against the PyTorch DataLoader's with the same transforms
    (torchvision's classification reference: PIL up to TrivialAugmentWide, then tensors) at the
    same worker count and batch size.

Usage: augment_torch.py --pinfeed PATH [--data DIR] [--photos DIR] [--images 512] [--workers N]
                        [--rounds 3] [--seconds 0.2] [--json FILE]
Rounds alternate pinfeed and torchvision; each ratio is the median of the rounds'.
"""
import argparse
import math
import os
import platform
import time

import torch
import torchvision
from PIL import Image
from torchvision.datasets import ImageFolder
from torchvision.transforms import v2
from torchvision.transforms.v2 import InterpolationMode
from torchvision.transforms.v2 import functional as F

from common import dataloader_images_per_s, median_of, pinfeed_rows, write_jsonl

BIL = InterpolationMode.BILINEAR
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
# pinfeed's spelling -> torchvision's call on a uint8 CHW tensor.
OPS = {
    "brightness(1.3)": lambda t: F.adjust_brightness(t, 1.3),
    "contrast(1.3)": lambda t: F.adjust_contrast(t, 1.3),
    "saturation(1.3)": lambda t: F.adjust_saturation(t, 1.3),
    "hue(0.1)": lambda t: F.adjust_hue(t, 0.1),
    "sharpness(1.5)": lambda t: F.adjust_sharpness(t, 1.5),
    "posterize(4)": lambda t: F.posterize(t, 4),
    "solarize(128)": lambda t: F.solarize(t, 128.0),
    "autocontrast": F.autocontrast,
    "equalize": F.equalize,
    "invert": F.invert,
    "grayscale(3)": lambda t: F.rgb_to_grayscale(t, 3),
    "gaussian_blur(9,2)": lambda t: F.gaussian_blur(t, [9, 9], [2.0, 2.0]),
    "rotate(30)": lambda t: F.rotate(t, 30.0),
    "rotate(30,interpolation=bilinear)": lambda t: F.rotate(t, 30.0, BIL),
    "affine(10,5,-5,1.1,8,0)": lambda t: F.affine(t, 10.0, [5, -5], 1.1, [8.0, 0.0]),
    "affine(10,5,-5,1.1,8,0,interpolation=bilinear)": lambda t: F.affine(t, 10.0, [5, -5], 1.1, [8.0, 0.0], BIL),
    "shear_x(0.3)": lambda t: F.affine(t, 0.0, [0, 0], 1.0, [math.degrees(math.atan(0.3)), 0.0], center=[0, 0]),
    "translate_x(20)": lambda t: F.affine(t, 0.0, [20, 0], 1.0, [0.0, 0.0]),
    "trivial_augment": v2.TrivialAugmentWide(),
    "rand_augment(2,9)": v2.RandAugment(2, 9),
    "auto_augment(imagenet)": v2.AutoAugment(),
    "color_jitter(0.4,0.4,0.4,0.1)": v2.ColorJitter(0.4, 0.4, 0.4, 0.1),
    "random_erasing(1)": v2.RandomErasing(p=1.0),
}
RECIPE = "rrc(224),hflip,trivial_augment,normalize(0.485,0.456,0.406,0.229,0.224,0.225),random_erasing(0.25)"


def test_image(photos):
    path = os.path.join(photos, "astronaut.png")
    if os.path.exists(path):
        im = Image.open(path).convert("RGB")
        t = F.pil_to_tensor(im)
        return F.center_crop(F.resize(t, 224, antialias=True), 224).contiguous()
    g = torch.Generator().manual_seed(3)
    return torch.randint(0, 256, (3, 224, 224), dtype=torch.uint8, generator=g)


def op_us(fn, t, seconds):
    fn(t)
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn(t)
        calls += 1
    return (time.perf_counter() - t0) * 1e6 / calls


def recipe_images_per_s(data, workers, batch, epochs):
    tf = v2.Compose([v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip(), v2.TrivialAugmentWide(),
                     v2.PILToTensor(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD),
                     v2.RandomErasing(0.25)])
    return dataloader_images_per_s(ImageFolder(os.path.join(data, "jpeg"), transform=tf), workers, batch, epochs)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pinfeed", required=True)
    ap.add_argument("--data", default="build/bench-data")
    ap.add_argument("--photos", default="build/photos")
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3, help="timed epochs of the recipe a round, each side (median)")
    ap.add_argument("--seconds", type=float, default=0.2)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    torch.set_num_threads(1)
    t = test_image(a.photos)
    ours, theirs, recipe_ours, recipe_theirs = {}, {}, [], []
    base = [a.pinfeed, "bench", "augment", "--data", a.data, "--photos", a.photos, "--images", str(a.images), "-w",
            str(a.workers), "-b", str(a.batch), "--seconds", str(a.seconds), "--repeats", str(a.epochs), "--ops", ";".join(OPS)]
    for r in range(a.rounds):
        for row in pinfeed_rows(base + ["--recipe", RECIPE]):
            if "op" in row:
                ours.setdefault(row["op"], []).append(row["us_per_image"])
            else:
                recipe_ours.append(row["images_per_s"])
                cpu = row.get("cpu")
        for name, fn in OPS.items():
            theirs.setdefault(name, []).append(op_us(fn, t, a.seconds))
        torch.set_num_threads(1)
        recipe_theirs.append(recipe_images_per_s(a.data, a.workers, a.batch, a.epochs))
    rows = []
    for name in OPS:
        p, tv = median_of(ours[name]), median_of(theirs[name])
        rows.append({"bench": "augment_compare", "op": name, "pinfeed_us": p, "torchvision_us": tv,
                     "speedup": tv / p, "rounds": a.rounds})
    p, tv = median_of(recipe_ours), median_of(recipe_theirs)
    rows.append({"bench": "augment_compare", "workload": "recipe", "transforms": RECIPE, "workers": a.workers,
                 "batch": a.batch, "images": a.images, "epochs": a.epochs, "pinfeed_images_per_s": p, "dataloader_images_per_s": tv,
                 "ratio": p / tv, "rounds": a.rounds})
    for r in rows:
        r.update({"cpu": cpu, "torch": torch.__version__, "torchvision": torchvision.__version__,
                  "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(), "python": platform.python_version()})
        print(r)
    write_jsonl(a.json, rows)


if __name__ == "__main__":
    main()
