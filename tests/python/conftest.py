"""Fixtures of the Python module's tests: an ImageFolder of real photos (crops of the photos
scripts/fetch-photos.sh fetches, saved as JPEG and PNG in three classes), the pinfeed tool."""

import os
import pathlib

import pytest


def _photos():
    d = os.environ.get("PINFEED_PHOTOS")
    if not d or not pathlib.Path(d).is_dir():
        pytest.fail("PINFEED_PHOTOS names no folder of photos (scripts/install-test-env.sh fetches them)")
    return sorted(p for p in pathlib.Path(d).iterdir() if p.suffix in (".jpg", ".png"))


@pytest.fixture(scope="session")
def photo_folder(tmp_path_factory):
    """root/<class>/<image>: 30 images of varied sizes (each at least 224 on its shorter side), the
    classes "cat", "dog", "zebra" with 12, 11 and 7 images, named so that sorting by path and by
    creation differ."""
    from PIL import Image

    root = tmp_path_factory.mktemp("folder")
    photos = [Image.open(p).convert("RGB") for p in _photos()]
    counts = {"dog": 11, "cat": 12, "zebra": 7}
    n = 0
    for cls, count in counts.items():
        (root / cls).mkdir()
        for i in range(count):
            im = photos[n % len(photos)]
            w, h = im.size
            side = 224 + (n * 37) % 120
            side = min(side, w, h)
            left, top = (n * 53) % (w - side + 1), (n * 29) % (h - side + 1)
            crop = im.crop((left, top, left + side + (n % 3) * 9 if left + side + 27 <= w else left + side, top + side))
            ext = ".png" if n % 5 == 0 else ".jpg"
            name = "%s_%02d%s" % ("ab"[i % 2], 40 - i, ext)
            if ext == ".jpg":
                crop.save(root / cls / name, quality=90)
            else:
                crop.save(root / cls / name)
            n += 1
    return root


@pytest.fixture(scope="session")
def pinfeed_cli():
    path = os.environ.get("PINFEED_CLI")
    if not path or not os.access(path, os.X_OK):
        pytest.fail("PINFEED_CLI names no pinfeed tool")
    return path
