#!/usr/bin/env python3
"""NVIDIA DALI's CPU pipeline over a JPEG folder (comparison only; run by jpeg_torch_dali.py in its
own virtualenv): readers.file, decoders.image_random_crop (libjpeg-turbo decoding the random crop's
window only: DALI's ROI-fused decode, torchvision's RandomResizedCrop parameters), resize to
224x224, a random horizontal flip; uint8 HWC out. No GPU: device_id=None.

Usage: dali_cpu.py FOLDER --threads N --batch N --epochs N
Prints one JSON line: images/s (the median of the timed epochs after a warm-up one) and DALI's version.
"""
import argparse
import json
import math
import statistics
import time

import nvidia.dali as dali
from nvidia.dali import fn, pipeline_def, types


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--epochs", type=int, required=True)
    a = ap.parse_args()

    @pipeline_def(batch_size=a.batch, num_threads=a.threads, device_id=None, seed=7)
    def jpeg_rrc_flip():
        jpegs, labels = fn.readers.file(file_root=a.folder, random_shuffle=True, name="files")
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB)
        images = fn.resize(images, resize_x=224, resize_y=224)
        return fn.flip(images, horizontal=fn.random.coin_flip()), labels

    pipe = jpeg_rrc_flip()
    pipe.build()
    images = pipe.epoch_size("files")
    steps = math.ceil(images / a.batch)
    rates = []
    for epoch in range(a.epochs + 1):  # the first warms up (threads, buffers) and is not timed
        t0 = time.perf_counter()
        for _ in range(steps):
            out, _ = pipe.run()
            assert out.at(0).shape == (224, 224, 3), out.at(0).shape
        if epoch > 0:
            rates.append(steps * a.batch / (time.perf_counter() - t0))
    print(json.dumps({"images_per_s": statistics.median(rates), "images": images, "dali": dali.__version__}))


if __name__ == "__main__":
    main()
