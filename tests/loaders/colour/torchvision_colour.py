#!/usr/bin/env python3
"""Inputs and torchvision v2's outputs for pinfeed's colour steps (tests/loaders/colour_test.cpp).

Usage: torchvision_colour.py OUT_DIR

Writes OUT_DIR/manifest.json and, per case, an input and torchvision's output as .npy (uint8, HWC):
every colour step at three magnitudes or more (torchvision.transforms.v2.functional on a uint8 CHW
tensor, the CPU), over the images of torchvision_images.py: real photos cut to odd and even sizes,
RGB and grey, a flat image, a two-level image, and a gradient of every value. The manifest names each
case's pinfeed spelling. Exits 3 where torch or torchvision cannot be imported (the test then says so).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
try:
    import torch  # noqa: F401 - the reference must be importable
    import torchvision  # noqa: F401
    from torchvision.transforms.v2 import functional as F
    from torchvision_images import prepared, save_case, write_manifest
except Exception as e:  # noqa: BLE001 - any import failure means no reference here
    print("torchvision is not importable: %s" % e)
    sys.exit(3)


def cases():
    for f in (0.0, 0.3, 1.0, 1.7, 3.0):
        yield "brightness(%r)" % f, lambda t, f=f: F.adjust_brightness(t, f)
        yield "contrast(%r)" % f, lambda t, f=f: F.adjust_contrast(t, f)
        yield "saturation(%r)" % f, lambda t, f=f: F.adjust_saturation(t, f)
        yield "sharpness(%r)" % f, lambda t, f=f: F.adjust_sharpness(t, f)
    for h in (-0.5, -0.2, 0.0, 0.1, 0.5):
        yield "hue(%r)" % h, lambda t, h=h: F.adjust_hue(t, h)
    for bits in (1, 4, 7, 8):
        yield "posterize(%d)" % bits, lambda t, b=bits: F.posterize(t, b)
    for th in (0.0, 100.5, 128.0, 238.00000101725262, 255.0):
        yield "solarize(%r)" % th, lambda t, th=th: F.solarize(t, th)
    yield "autocontrast", F.autocontrast
    yield "equalize", F.equalize
    yield "invert", F.invert
    yield "grayscale(1)", lambda t: F.rgb_to_grayscale(t, 1)
    yield "grayscale(3)", lambda t: F.rgb_to_grayscale(t, 3)


def main():
    out_dir = sys.argv[1]
    entries = []
    inputs, real = prepared(out_dir)
    for name, img, t in inputs:
        for k, (spelling, op) in enumerate(cases()):
            if (spelling.startswith("grayscale") or spelling.startswith("hue")) and img.shape[2] == 1:
                continue  # a copy in torchvision; pinfeed's grayscale copies too, its hue refuses grey (unit tests)
            file = save_case(out_dir, name, k, op(t))
            entries.append({"image": name + ".in.npy", "steps": spelling, "expected": file})
    write_manifest(out_dir, entries, real)


if __name__ == "__main__":
    main()
