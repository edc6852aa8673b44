#!/usr/bin/env python3
"""pinfeed with workers and prefetch on auto against the PyTorch DataLoader configured as its docs
suggest (num_workers = the cores, pin_memory=True, shuffle, persistent workers, its default
prefetch_factor), on the same data: the article's synthetic pipeline, a JPEG folder and the same
JPEGs' tar shards served by nginx on loopback with --latency-ms added to every request, all through
RandomResizedCrop(224) + flip. The DataLoader reads the shards as a map-style dataset does: an
HTTP range request per sample (keep-alive, one connection per worker), the latency slept before
each; the labels come from the local index it builds at start. Both sides run one untimed epoch, then --epochs timed; rounds
interleave them, and a ratio is the median of the rounds'.

Usage: autotune_torch.py --pinfeed PATH [--data DIR] [--images N] [--rounds 3] [--epochs 2] [--json FILE]
"""
import argparse
import glob
import io
import http.client
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import torch
import torchvision.transforms as T
from torch.utils.data import DataLoader
from PIL import Image
from torchvision.datasets import ImageFolder

from common import median_of, pinfeed_rows, write_jsonl
from pipeline_torch import ConvertColor, FakeDataset, RandomMask, Scale, TarShards


class RemoteTarShards(TarShards):
    """TarShards whose image bytes come over HTTP, a range request per sample after `latency_s`."""

    def __init__(self, paths, transform, port, latency_s):
        super().__init__(paths, transform)
        self.port, self.latency_s, self.conn = port, latency_s, None
        self.labels = {}
        for p, _, _, coff, csize in self.items:
            with open(p, "rb") as f:
                f.seek(coff)
                self.labels[(p, coff)] = int(f.read(csize))

    def __getitem__(self, i):
        path, off, size, coff, _ = self.items[i]
        if self.conn is None:  # one keep-alive connection per worker process
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port)
        time.sleep(self.latency_s)
        self.conn.request("GET", "/" + os.path.basename(path), headers={"Range": f"bytes={off}-{off + size - 1}"})
        answer = self.conn.getresponse()
        body = answer.read()
        if answer.status != 206 or len(body) != size:
            raise RuntimeError(f"range read of {path} at {off}: HTTP {answer.status}, {len(body)} bytes")
        img = Image.open(io.BytesIO(body)).convert("RGB")
        return self.transform(img), self.labels[(path, coff)]


class Nginx:
    """nginx serving `root` on 127.0.0.1 (range requests included) until stop()."""

    def __init__(self, root):
        self.work = tempfile.mkdtemp(prefix="pinfeed-compare-nginx-")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        conf = os.path.join(self.work, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"daemon off; master_process off; worker_processes 1; pid {self.work}/nginx.pid;\n"
                    f"error_log {self.work}/error.log error; events {{ worker_connections 1024; }}\n"
                    f"http {{ access_log off; sendfile on; keepalive_requests 100000;\n"
                    f"  client_body_temp_path {self.work}/b; proxy_temp_path {self.work}/p; fastcgi_temp_path {self.work}/f;\n"
                    f"  uwsgi_temp_path {self.work}/u; scgi_temp_path {self.work}/s;\n"
                    f"  server {{ listen 127.0.0.1:{self.port}; root {root}; }} }}\n")
        self.proc = subprocess.Popen(["/usr/sbin/nginx", "-c", conf, "-p", self.work])
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.1).close()
                return
            except OSError:
                time.sleep(0.01)
        raise RuntimeError("nginx did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        shutil.rmtree(self.work, ignore_errors=True)


def images_per_s(dataset, batch, epochs):
    cores = os.cpu_count()
    loader = DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=cores,
                        pin_memory=torch.cuda.is_available(), persistent_workers=True)
    images, seconds = 0, 0.0
    for e in range(epochs + 1):
        t0 = time.perf_counter()
        n = sum(len(b[1]) for b in loader)
        if e > 0:
            seconds += time.perf_counter() - t0
            images += n
    return images / seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pinfeed", required=True)
    ap.add_argument("--data", default="/tmp/pinfeed-bench-data")
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--synthetic-samples", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--latency-ms", type=int, default=20)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(1)  # each DataLoader worker one thread, as each pinfeed worker
    # pinfeed's auto rows alone: a one-setting grid (1 worker, prefetch 2) beside them.
    cmd = [a.pinfeed, "bench", "autotune", "--workloads", "synthetic,jpeg_folder,remote", "--data", a.data, "--images",
           str(a.images), "--synthetic-samples", str(a.synthetic_samples), "--batch", str(a.batch), "--epochs",
           str(a.epochs), "--rounds", "1", "--workers", "1", "--prefetch", "2", "--requests-in-flight", "64",
           "--latency-ms", str(a.latency_ms)]
    remote_name = f"remote_shards_{a.latency_ms}ms_rrc_flip"
    article = T.Compose([T.PILToTensor(), T.RandomCrop(256), RandomMask(), ConvertColor(), Scale()])
    rrc = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor()])
    names = ["synthetic_article", "jpeg_folder_rrc_flip", remote_name]
    rounds, host = [], {}
    for _ in range(a.rounds):
        rows = pinfeed_rows(cmd)  # also writes the data set on the first round
        ours = {r["workload"]: r for r in rows if r.get("setting") == "auto"}
        host = {k: rows[0][k] for k in ("cpu", "simd", "compiler", "build_type")}
        theirs = {
            "synthetic_article": images_per_s(FakeDataset(a.synthetic_samples, article), a.batch, a.epochs),
            "jpeg_folder_rrc_flip": images_per_s(ImageFolder(os.path.join(a.data, "jpeg"), transform=rrc), a.batch, a.epochs),
        }
        shards = sorted(glob.glob(os.path.join(a.data, "shards", "*.tar")))  # pinfeed's bench made them
        server = Nginx(os.path.join(a.data, "shards"))
        try:
            theirs[remote_name] = images_per_s(RemoteTarShards(shards, rrc, server.port, a.latency_ms / 1000), a.batch,
                                               a.epochs)
        finally:
            server.stop()
        rounds.append((ours, theirs))
    out = []
    print(f"{'workload':<22} {'DataLoader':>11} {'pinfeed auto':>13} {'auto / DataLoader':>18} | chose")
    for name in names:
        mine = [r[0][name]["images_per_s"] for r in rounds]
        base = [r[1][name] for r in rounds]
        ratio = median_of([m / b for m, b in zip(mine, base)])
        chose = rounds[-1][0][name]
        print(f"{name:<22} {median_of(base):>11.1f} {median_of(mine):>13.1f} {ratio:>17.2f}x | "
              f"workers {chose['chose_workers']}, prefetch {chose['chose_prefetch']}")
        out.append({"bench": "autotune_vs_dataloader", "workload": name, "dataloader_workers": os.cpu_count(),
                    "dataloader_pin_memory": torch.cuda.is_available(), "dataloader_images_per_s": median_of(base),
                    "pinfeed_auto_images_per_s": median_of(mine), "auto_over_dataloader": ratio,
                    "rounds_dataloader": base, "rounds_pinfeed_auto": mine, "chose_workers": chose["chose_workers"],
                    "chose_prefetch": chose["chose_prefetch"], "batch": a.batch, "epochs": a.epochs,
                    "latency_ms": a.latency_ms if name == remote_name else 0, **host})
    write_jsonl(a.json, out)


if __name__ == "__main__":
    sys.exit(main())
