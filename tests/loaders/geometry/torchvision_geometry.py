#!/usr/bin/env python3
"""Inputs and torchvision v2's outputs for pinfeed's warps (tests/loaders/geometry_test.cpp).

Usage: torchvision_geometry.py OUT_DIR

Writes OUT_DIR/manifest.json and, per case, an input and torchvision's output as .npy (uint8, HWC):
torchvision.transforms.v2.functional.rotate and affine on a uint8 CHW tensor (the CPU), and the
auto-augment policies' ShearX, ShearY, TranslateX and TranslateY as torchvision's policies call
affine, each at several magnitudes, nearest and bilinear, without a fill and with one, over the
images of torchvision_images.py. Exits 3 where torch or torchvision cannot be imported.
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
try:
    import torch  # noqa: F401 - the reference must be importable
    import torchvision  # noqa: F401
    from torchvision.transforms.v2 import InterpolationMode
    from torchvision.transforms.v2 import functional as F
    from torchvision_images import prepared, save_case, write_manifest
except Exception as e:  # noqa: BLE001 - any import failure means no reference here
    print("torchvision is not importable: %s" % e)
    sys.exit(3)

MODES = {"nearest": InterpolationMode.NEAREST, "bilinear": InterpolationMode.BILINEAR}


def spell(op, values, fill, mode):
    s = op + "(" + ",".join(repr(float(v)) for v in values)
    if fill is not None:
        s += ",%r" % float(fill)
    if mode != "nearest":
        s += ",interpolation=" + mode
    return s + ")"


def cases():
    for mode, im in MODES.items():
        for fill in (None, 0, 128):
            for a in (0.0, 90.0, 180.0, 270.0, -90.0, 30.0, -45.5, 123.4, 359.9, 17.0, 720.0):
                yield "rotate", spell("rotate", [a], fill, mode), lambda t, a=a, im=im, f=fill: F.rotate(t, a, im, fill=f)
            for p in ((10.0, 2.0, -3.0, 1.1, 5.0, -4.0), (-33.0, 0.5, 7.25, 0.8, 0.0, 12.0), (0.0, 3.0, 0.0, 1.0, 0.0, 0.0),
                      (170.0, -6.0, 1.0, 1.7, -20.0, 3.0)):
                yield "affine", spell("affine", p, fill, mode), lambda t, p=p, im=im, f=fill: F.affine(
                    t, angle=p[0], translate=[p[1], p[2]], scale=p[3], shear=[p[4], p[5]], interpolation=im, fill=f)
            for m in (-0.3, 0.1, 0.99):
                yield "shear_x", spell("shear_x", [m], fill, mode), lambda t, m=m, im=im, f=fill: F.affine(
                    t, angle=0.0, translate=[0, 0], scale=1.0, shear=[math.degrees(math.atan(m)), 0.0], interpolation=im,
                    fill=f, center=[0, 0])
                yield "shear_y", spell("shear_y", [m], fill, mode), lambda t, m=m, im=im, f=fill: F.affine(
                    t, angle=0.0, translate=[0, 0], scale=1.0, shear=[0.0, math.degrees(math.atan(m))], interpolation=im,
                    fill=f, center=[0, 0])
            for px in (-10.7, 3.0, 150.0):
                yield "translate_x", spell("translate_x", [px], fill, mode), lambda t, px=px, im=im, f=fill: F.affine(
                    t, angle=0.0, translate=[int(px), 0], scale=1.0, interpolation=im, shear=[0.0, 0.0], fill=f)
                yield "translate_y", spell("translate_y", [px], fill, mode), lambda t, px=px, im=im, f=fill: F.affine(
                    t, angle=0.0, translate=[0, int(px)], scale=1.0, interpolation=im, shear=[0.0, 0.0], fill=f)


def main():
    out_dir = sys.argv[1]
    entries = []
    inputs, real = prepared(out_dir)
    for name, img, t in inputs:
        for k, (op, spelling, fn) in enumerate(cases()):
            res = fn(t)
            file = save_case(out_dir, name, k, res)
            mode = "bilinear" if "bilinear" in spelling else "nearest"
            entries.append({"image": name + ".in.npy", "steps": spelling, "op": op + " " + mode, "expected": file})
    write_manifest(out_dir, entries, real)


if __name__ == "__main__":
    main()
