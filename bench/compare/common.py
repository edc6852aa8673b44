"""Helpers shared by the comparison scripts: running a pinfeed benchmark, taking the median of
interleaved rounds and writing JSON lines."""
import json
import os
import platform
import statistics
import subprocess


def median_of(xs, empty=None):
    """The median of the figures in xs that were measured (not None, not NaN); `empty` when none was."""
    xs = [x for x in xs if x is not None and x == x]
    return statistics.median(xs) if xs else empty


def pinfeed_rows(cmd):
    """Runs a `pinfeed bench ...` command line and returns its JSON rows."""
    env = dict(os.environ, PINFEED_LOG_LEVEL="warn")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def write_jsonl(path, rows):
    """Writes one JSON object per line (nothing when path is empty)."""
    if not path:
        return
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def append_jsonl(path, row):
    """Appends one JSON object as a line (nothing when path is empty); the first call of a run truncates."""
    if not path:
        return
    mode = "a" if path in _started else "w"
    _started.add(path)
    with open(path, mode) as f:
        f.write(json.dumps(row) + "\n")


_started = set()


def dataloader_images_per_s(ds, workers, batch, epochs):
    """Images/s of a torch DataLoader over `ds` (shuffled, `workers` persistent workers): one
    warm-up epoch (the workers started), then the median of `epochs` timed epochs."""
    import time

    from torch.utils.data import DataLoader

    dl = DataLoader(ds, batch_size=batch, num_workers=workers, persistent_workers=workers > 0, shuffle=True)
    for _ in dl:
        pass
    rates = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        for _ in dl:
            pass
        rates.append(len(ds) / (time.perf_counter() - t0))
    return median_of(rates)


def make_folder(photos, root, images):
    """root/<class>/<i>.jpg: `images` 500x375 crops of the photos, 4 classes, quality 90."""
    from PIL import Image

    marker = os.path.join(root, ".made-%d" % images)
    if os.path.exists(marker):
        return
    srcs = [Image.open(os.path.join(photos, p)).convert("RGB") for p in sorted(os.listdir(photos)) if p.endswith((".png", ".jpg"))]
    for i in range(images):
        im = srcs[i % len(srcs)]
        w, h = im.size
        cw, ch = min(500, w), min(375, h)
        left, top = (i * 37) % (w - cw + 1), (i * 53) % (h - ch + 1)
        d = os.path.join(root, "c%d" % (i % 4))
        os.makedirs(d, exist_ok=True)
        im.crop((left, top, left + cw, top + ch)).save(os.path.join(d, "%05d.jpg" % i), quality=90)
    open(marker, "w").close()


def cpu_model():
    """The CPU's model name as /proc/cpuinfo gives it."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
