"""Helpers shared by the comparison scripts: running a pinfeed benchmark, taking the median of
interleaved rounds and writing JSON lines."""
import json
import os
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
