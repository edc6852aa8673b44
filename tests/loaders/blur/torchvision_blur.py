#!/usr/bin/env python3
"""Inputs and torchvision v2's outputs for pinfeed's gaussian_blur (tests/loaders/blur_test.cpp).

Usage: torchvision_blur.py OUT_DIR

Writes OUT_DIR/manifest.json and, per case, an input and torchvision's output as .npy (uint8, HWC):
torchvision.transforms.v2.functional.gaussian_blur on a uint8 CHW tensor (the CPU) at kernels of
1 to 23 taps, square and not, sigmas from 0.1 to 8 and the default, over the images of
torchvision_images.py. Exits 3 where torch or torchvision cannot be imported.
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

# (kx, sx, ky, sy); a sigma of None: torchvision's default. pinfeed spells a square one
# gaussian_blur(K, S) and any other gaussian_blur(KX, SX, KY, SY).
CASES = [(3, 0.1, 3, 0.1), (3, 1.0, 3, 1.0), (5, None, 5, None), (7, 2.5, 7, 2.5), (9, 0.8, 9, 0.8),
         (1, 1.0, 1, 1.0), (3, 0.7, 9, 3.0), (11, 8.0, 5, 0.5), (23, 4.0, 23, 4.0), (13, None, 1, None)]


def spelling(kx, sx, ky, sy):
    s = lambda v: 0 if v is None else v
    if kx == ky and sx == sy:
        return "gaussian_blur(%d,%r)" % (kx, s(sx))
    return "gaussian_blur(%d,%r,%d,%r)" % (kx, s(sx), ky, s(sy))


def main():
    out_dir = sys.argv[1]
    entries = []
    inputs, real = prepared(out_dir)
    for name, img, t in inputs:
        for k, (kx, sx, ky, sy) in enumerate(CASES):
            if kx // 2 >= img.shape[1] or ky // 2 >= img.shape[0]:
                continue  # torchvision refuses it (reflect padding): pinfeed too (unit tests)
            sigma = None if sx is None else [sx, sy]
            res = F.gaussian_blur(t, [kx, ky], sigma)
            file = save_case(out_dir, name, k, res)
            entries.append({"image": name + ".in.npy", "steps": spelling(kx, sx, ky, sy), "op": "gaussian_blur",
                            "expected": file})
    write_manifest(out_dir, entries, real)


if __name__ == "__main__":
    main()
