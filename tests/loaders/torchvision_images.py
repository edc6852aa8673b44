"""The images every torchvision comparison runs over (tests/loaders/*/torchvision_*.py).

Real photos (scripts/fetch-photos.sh: the scikit-image samples, in the test environment's
photos/ folder) cut to odd and even sizes, RGB and grey, and three made ones: a flat image, a
two-level image and a gradient of every value. Without the photos (outside the test environment)
smooth photo-like fields with noise stand in for them, and the manifest says so.
"""
import json
import os

import numpy as np

# (photo, top, left, height, width): odd and even sizes, wide and tall, from four photos.
CUTS = [("astronaut.png", 40, 150, 37, 53), ("coffee.png", 100, 200, 64, 48), ("chelsea.png", 20, 60, 101, 90),
        ("rocket.jpg", 50, 120, 48, 75), ("astronaut.png", 300, 300, 5, 7)]


def photos_dir():
    here = os.path.dirname(os.path.abspath(__file__))
    return os.environ.get("PINFEED_TEST_PHOTOS", os.path.join(here, "..", "..", ".venv-test", "photos"))


def images():
    """(name, HWC uint8 array) pairs, and whether real photos were used."""
    rng = np.random.default_rng(7)
    out = []
    real = True
    try:
        from PIL import Image
        for photo, top, left, h, w in CUTS:
            with Image.open(os.path.join(photos_dir(), photo)) as im:
                arr = np.asarray(im.convert("RGB"))
            out.append(("%s-%dx%d" % (photo.split(".")[0], h, w), np.ascontiguousarray(arr[top:top + h, left:left + w])))
    except (OSError, ImportError):
        real = False
        out = []
        for _, _, _, h, w in CUTS:
            y, x = np.mgrid[0:h, 0:w].astype(np.float64)
            field = np.stack([128 + 100 * np.sin(x / (w / 3.1) + c) * np.cos(y / (h / 2.3) - c) for c in range(3)], axis=-1)
            field += rng.normal(0, 12, field.shape)
            out.append(("field%dx%d" % (h, w), np.clip(field, 0, 255).astype(np.uint8)))
    out.append(("flat", np.full((9, 11, 3), 77, np.uint8)))
    two = np.zeros((12, 10, 3), np.uint8)
    two[:, 5:] = (200, 31, 140)
    out.append(("two-level", two))
    out.append(("every-value", np.arange(256 * 3, dtype=np.int64).reshape(16, 16, 3).astype(np.uint8)))
    greys = [(name + "-grey", np.ascontiguousarray(img[..., :1])) for name, img in out[:3]]
    return out + greys, real


def write_manifest(out_dir, entries, real):
    """Writes OUT_DIR/manifest.json (torch's and torchvision's versions, PyTorch's CPU kernels,
    whether real photos were cut, the cases) and prints one line saying so."""
    import torch
    import torchvision
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump({"torch": torch.__version__, "torchvision": torchvision.__version__,
                   "cpu_capability": torch.backends.cpu.get_cpu_capability(), "photos": real, "entries": entries}, f,
                  indent=1)
    print("%d cases, torch %s, torchvision %s, %s" % (len(entries), torch.__version__, torchvision.__version__,
                                                   "real photos" if real else "no photos: made fields instead"))


def save_case(out_dir, name, k, tensor):
    """Writes torchvision's output (a CHW tensor) as NAME.K.out.npy (HWC) and returns the file name."""
    file = "%s.%d.out.npy" % (name, k)
    np.save(os.path.join(out_dir, file), tensor.permute(1, 2, 0).contiguous().numpy())
    return file


def prepared(out_dir):
    """Makes OUT_DIR and writes each image of images() there as NAME.in.npy: [(name, HWC array, CHW
    uint8 tensor)], and whether real photos were cut."""
    import torch
    os.makedirs(out_dir, exist_ok=True)
    imgs, real = images()
    out = []
    for name, img in imgs:
        np.save(os.path.join(out_dir, name + ".in.npy"), img)
        out.append((name, img, torch.from_numpy(img).permute(2, 0, 1).contiguous()))
    return out, real
