#!/usr/bin/env python3
"""The wheel on its own (scripts/check-wheel.sh runs this in a fresh environment with the wheel
installed, outside the source tree, with no CUDA library on the loader's path): its files and
tag, an extension that needs no CUDA library, and batches on the CPU. Exits non-zero, naming
what failed.

Usage: wheel_check.py WHEEL
"""
import os
import struct
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
import zlib


def check(cond, what):
    if not cond:
        sys.exit("wheel_check: " + what)


def png(path, width, height):
    """An RGB PNG of a gradient (zlib alone: the environment has no imaging library)."""
    rows = b"".join(b"\0" + bytes((x * 7 + y * 3) & 255 for x in range(width) for _ in range(3)) for y in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def main():
    wheel = sys.argv[1]
    name = os.path.basename(wheel)
    # The tag: abi3 from CPython 3.12 (nanobind's stable ABI), the interpreter's own before it.
    want = "cp312-abi3" if sys.version_info >= (3, 12) else "cp%d%d-cp%d%d" % (sys.version_info[:2] * 2)
    check("-%s-linux_" % want in name, "%s: the tag is not %s" % (name, want))
    files = set(zipfile.ZipFile(wheel).namelist())
    for f in ("pinfeed/__init__.py", "pinfeed/torch.py", "pinfeed/libpinfeed_imgcodecs.so"):
        check(f in files, "%s lacks %s (it has %s)" % (name, f, sorted(files)))
    check(any(f.startswith("pinfeed/_pinfeed.") and f.endswith(".so") for f in files), "%s has no extension module" % name)

    import numpy as np
    import pinfeed

    site = sysconfig.get_paths()["purelib"]
    check(pinfeed.__file__.startswith(site), "pinfeed imported from %s, not the environment's %s" % (pinfeed.__file__, site))
    ext = pinfeed._pinfeed.__file__
    libs = subprocess.run(["ldd", ext], capture_output=True, text=True, check=True).stdout
    for lib in ("libcudart", "libcuda.", "libnvjpeg", "not found"):
        check(lib not in libs, "%s: ldd names %s:\n%s" % (ext, lib, libs))

    plan = pinfeed.node_plan()
    check(isinstance(plan, dict) and plan, "node_plan() gave %r" % (plan,))
    loader = pinfeed.Loader(pinfeed.synthetic(samples=10, height=8, width=12, classes=3), 4, workers=2, device="auto")
    check(loader.device == "cpu", "device 'auto' without a GPU is %r, not 'cpu'" % loader.device)
    sizes = []
    for b in loader:
        img = np.from_dlpack(b["image"])
        label = np.from_dlpack(b["label"])
        check(img.dtype == np.uint8 and img.shape[1:] == (8, 12, 3), "image field %s %s" % (img.dtype, img.shape))
        check(label.dtype == np.int64 and ((label >= 0) & (label < 3)).all(), "labels %r" % (label,))
        sizes.append(len(b))
        del img, label, b
    check(sizes == [4, 4, 2], "batch sizes %r, not [4, 4, 2]" % sizes)
    loader.close()
    try:
        pinfeed.Loader(pinfeed.synthetic(samples=4, height=8, width=8), 2, device="cuda")
        check(False, "device 'cuda' without a GPU gave a loader")
    except pinfeed.Error as e:
        check("cuda" in str(e).lower(), "device 'cuda' without a GPU: %s" % e)

    # A PNG: decoded by the PNG, WebP and TIFF module the wheel carries beside the extension.
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "a"))
        png(os.path.join(d, "a", "x.png"), 40, 30)
        loader = pinfeed.Loader(pinfeed.image_folder(d, "center_crop(16)"), 1, workers=1, device="cpu")
        b = loader.next()
        img = np.from_dlpack(b["image"])
        check(img.shape[-3:] in ((16, 16, 3), (3, 16, 16)), "the PNG's crop is %s" % (img.shape,))
        del img, b
        loader.close()
    maps = open("/proc/self/maps").read()
    module = os.path.join(os.path.dirname(pinfeed.__file__), "libpinfeed_imgcodecs.so")
    check(module in maps, "the PNG was not decoded by the wheel's %s" % module)
    print("wheel_check: %s: tag %s, no CUDA library needed, CPU batches and a PNG through %s" % (name, want, module))


if __name__ == "__main__":
    main()
