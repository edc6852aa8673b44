"""pinfeed.torch under torchrun: 2 ranks with gloo over a dataset that does not divide evenly.
No rank hangs at an epoch's end, the ranks together see every sample once (padded or dropped as
chosen), and a 2-rank state resumed in 1 rank delivers the remaining samples once."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import pinfeed
import pinfeed.torch

N = 23  # samples: 12 a rank with padding, 11 with the remainder dropped

RANK_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    import torch
    import torch.distributed as dist
    import pinfeed, pinfeed.torch

    out, drop = sys.argv[1], sys.argv[2] == "drop"
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    src = pinfeed.from_function(%d, [("idx", "i64", []), ("label", "i64", [])], lambda i: {"idx": i, "label": i %% 3})
    loader = pinfeed.torch.Loader(src, batch_size=4, shuffle=True, seed=11, drop_remainder=drop)  # rank, world: torchrun's
    seen, steps = [], 0
    loader.set_epoch(0)
    for batch in loader:
        seen += batch["idx"].tolist()
        total = torch.tensor([len(batch["idx"])])
        dist.all_reduce(total)  # a rank with fewer batches would hang here
        steps += 1
    # Epoch 1: two batches, then the state a checkpoint would keep.
    loader.set_epoch(1)
    it = iter(loader)
    first = [next(it)["idx"].tolist() for _ in range(2)]
    dist.barrier()
    with open(os.path.join(out, "rank%%d.json" %% rank), "w") as f:
        json.dump({"rank": rank, "world": dist.get_world_size(), "len": len(loader), "steps": steps, "seen": seen,
                   "epoch1_first": first, "state": loader.state_dict()}, f)
    dist.destroy_process_group()
""" % N)


def torchrun(tmp_path, mode):
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    out = tmp_path / mode
    out.mkdir()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(script), str(out),
                    mode], check=True, timeout=300, env=env, capture_output=True)
    return [json.loads((out / ("rank%d.json" % r)).read_text()) for r in (0, 1)]


@pytest.mark.parametrize("mode", ["pad", "drop"])
def test_two_ranks_see_every_sample_once_and_no_rank_hangs(tmp_path, mode):
    ranks = torchrun(tmp_path, mode)
    assert [r["world"] for r in ranks] == [2, 2] and [r["rank"] for r in ranks] == [0, 1]
    per_rank = 12 if mode == "pad" else 11
    for r in ranks:
        assert len(r["seen"]) == per_rank
        assert r["steps"] == r["len"] == 3  # 12 or 11 samples in batches of 4: the same steps on both ranks
    together = ranks[0]["seen"] + ranks[1]["seen"]
    if mode == "pad":
        assert set(together) == set(range(N)) and len(together) == N + 1  # one sample repeated to pad
    else:
        assert len(set(together)) == len(together) == 22  # the remainder left out, the rest once

    # Resume both ranks' epoch 1 in one process: rank 0's state at world 1 delivers what the two
    # ranks had not delivered yet, each once.
    delivered = [i for r in ranks for batch in r["epoch1_first"] for i in batch]
    one = pinfeed.torch.Loader(pinfeed.from_function(N, [("idx", "i64", []), ("label", "i64", [])], lambda i: {"idx": i, "label": i % 3}),
                               batch_size=4, shuffle=True, seed=11, rank=0, world_size=1, drop_remainder=(mode == "drop"))
    one.load_state_dict(ranks[0]["state"])
    rest = [i for batch in one for i in batch["idx"].tolist()]
    assert len(rest) == len(set(rest))
    assert not set(rest) & set(delivered)
    covered = set(rest) | set(delivered)
    if mode == "pad":
        assert covered == set(range(N))
    else:  # every sample but at most the one the 2-rank epoch leaves out
        assert covered <= set(range(N)) and len(covered) >= N - 1
