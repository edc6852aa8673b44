"""The sources from Python beside the pinfeed tool's: a file list, local tar shards and the same
shards on S3 (moto's server on loopback) give the checksum lines `pinfeed run` gives for them;
a source that cannot be read raises a pinfeed.Error naming it."""

import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

import pinfeed

RECIPE = "center_crop(224)"


def cli_lines(pinfeed_cli, source, env=None):
    run = subprocess.run([pinfeed_cli, "run", "--source", source, "--transforms", RECIPE, "-b", "8", "-w", "2", "--seed", "3",
                          "--shuffle", "--device", "cpu", "--checksums"], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    return [line for line in run.stdout.splitlines() if line.startswith("batch ")]


def python_lines(source, shuffle=True):
    loader = pinfeed.Loader(source, 8, workers=2, seed=3, shuffle=shuffle, device="cpu")
    lines, labels = [], []
    for b in loader:
        lines.append(b.checksum_line())
        labels += np.from_dlpack(b["label"]).tolist()
    loader.close()
    return lines, sorted(labels)


@pytest.fixture(scope="module")
def packed(photo_folder, pinfeed_cli, tmp_path_factory):
    """The photo folder packed into tar shards (with their sidecar indexes): (dir, brace pattern)."""
    d = tmp_path_factory.mktemp("shards")
    subprocess.run([pinfeed_cli, "pack", "--source", "folder:%s" % photo_folder, "--out", str(d / "train"), "--shard-mb", "0.5"],
                   check=True, capture_output=True)
    tars = sorted(p.name for p in d.iterdir() if p.suffix == ".tar")
    assert len(tars) >= 2, tars  # several shards, so that the pattern's range matters
    assert tars == ["train-%06d.tar" % i for i in range(len(tars))]
    return d, "train-{000000..%06d}.tar" % (len(tars) - 1)


def folder_labels(photo_folder):
    import torchvision
    return sorted(t for _, t in torchvision.datasets.ImageFolder(str(photo_folder)).samples)


def test_a_file_list_gives_the_clis_batches(photo_folder, pinfeed_cli, tmp_path):
    import torchvision
    listing = tmp_path / "train.txt"
    samples = torchvision.datasets.ImageFolder(str(photo_folder)).samples
    listing.write_text("".join("%s %d\n" % (p, t) for p, t in samples))
    lines, labels = python_lines(pinfeed.file_list(str(listing), RECIPE))
    assert len(lines) == 4
    assert lines == cli_lines(pinfeed_cli, "list:%s" % listing)
    assert labels == sorted(t for _, t in samples)


def test_local_shards_give_the_clis_batches(photo_folder, pinfeed_cli, packed):
    d, pattern = packed
    lines, labels = python_lines(pinfeed.shards(str(d / pattern), RECIPE))
    assert len(lines) == 4
    assert lines == cli_lines(pinfeed_cli, "shards:%s" % (d / pattern))
    assert labels == folder_labels(photo_folder)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def s3(packed, monkeypatch):
    """moto's S3 server on loopback holding the shards in bucket "data"; the AWS variables set."""
    server = pathlib.Path(sys.executable).parent / "moto_server"
    if not server.exists():
        pytest.fail("moto_server is not in the test environment (scripts/install-test-env.sh installs it)")
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "AWS_SESSION_TOKEN",
                 "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    port = free_port()
    url = "http://127.0.0.1:%d" % port
    proc = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url + "/moto-api/", timeout=1).read()
                break
            except OSError:
                assert proc.poll() is None, "moto_server exited with %s" % proc.returncode
                assert time.monotonic() < deadline, "moto_server did not answer on %s within 30 s" % url
                time.sleep(0.1)
        for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
                     "AWS_ENDPOINT_URL": url}.items():
            monkeypatch.setenv(k, v)
        import boto3
        client = boto3.client("s3", endpoint_url=url, region_name="us-east-1")
        client.create_bucket(Bucket="data")
        d, _ = packed
        for p in sorted(d.iterdir()):
            client.upload_file(str(p), "data", p.name)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_shards_on_s3_give_the_local_shards_batches(photo_folder, pinfeed_cli, packed, s3):
    d, pattern = packed
    remote = "s3://data/" + pattern
    # In order, the remote shards' batches are the local ones; shuffled, remote shards are read a
    # whole shard at a time (a shard-aware order), so the tool over the same URL is the reference.
    assert python_lines(pinfeed.shards(remote, RECIPE), shuffle=False) == python_lines(pinfeed.shards(str(d / pattern), RECIPE),
                                                                                     shuffle=False)
    lines, labels = python_lines(pinfeed.shards(remote, RECIPE))
    assert lines == cli_lines(pinfeed_cli, "shards:" + remote, env=os.environ.copy())
    assert labels == folder_labels(photo_folder)
    # A shard the bucket lacks: the error names it.
    with pytest.raises(pinfeed.Error, match=r"s3://data/train-000098\.tar: HTTP 404"):
        python_lines(pinfeed.shards("s3://data/train-{000098..000099}.tar", RECIPE))
