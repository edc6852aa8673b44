#!/usr/bin/env python3
"""torchvision v2's policy definitions for pinfeed's policies (tests/loaders/policies_test.cpp).

Usage: torchvision_policies.py OUT_DIR

Writes OUT_DIR/manifest.json: each policy's op names in torchvision's order, every magnitude table
(the float32 values torchvision computes, for the image sizes and bin counts listed), and
AutoAugment's three lists of sub-policies. Exits 3 where torch or torchvision cannot be imported.
"""
import json
import os
import sys

try:
    import torch
    import torchvision
    from torchvision.transforms.v2 import AutoAugment, AutoAugmentPolicy, RandAugment, TrivialAugmentWide
except Exception as e:  # noqa: BLE001 - any import failure means no reference here
    print("torchvision is not importable: %s" % e)
    sys.exit(3)


def tables(space, bins, h, w):
    out = {}
    for name, (fn, signed) in space.items():
        t = fn(bins, h, w)
        out[name] = {"signed": bool(signed), "values": None if t is None else [float(v) for v in t.tolist()]}
    return out


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    sizes = [(224, 224), (37, 53), (331, 500)]
    m = {"torch": torch.__version__, "torchvision": torchvision.__version__,
         "cpu_capability": torch.backends.cpu.get_cpu_capability(), "photos": True, "entries": [], "policies": {}}
    for key, cls, bin_counts in (("trivial_augment", TrivialAugmentWide, (31, 7, 2)), ("rand_augment", RandAugment, (31, 10, 5)),
                                 ("auto_augment", AutoAugment, (10,))):
        space = cls._AUGMENTATION_SPACE
        m["policies"][key] = {"ops": list(space.keys()), "tables": [
            {"bins": b, "height": h, "width": w, "ops": tables(space, b, h, w)} for b in bin_counts for (h, w) in sizes]}
    m["auto_augment"] = {p.value: [[list(step) for step in sub] for sub in AutoAugment(p)._policies]
                         for p in (AutoAugmentPolicy.IMAGENET, AutoAugmentPolicy.CIFAR10, AutoAugmentPolicy.SVHN)}
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(m, f, indent=1)
    print("policies of torchvision %s (torch %s, %s)" % (torchvision.__version__, torch.__version__,
                                                         torch.backends.cpu.get_cpu_capability()))


if __name__ == "__main__":
    main()
