"""pinfeed.torch: a training loop's loader in place of DataLoader; ResNet-18 learns from it."""

import math

import numpy as np
import pytest
import torch
import torchvision
from torchvision.transforms import v2

import pinfeed
import pinfeed.torch

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def test_resnet18_trains_20_steps_from_pinfeed_batches_shaped_as_the_dataloaders(photo_folder):
    torch.manual_seed(0)
    torch.set_num_threads(2)
    pipeline = "center_crop(224),resize(64),normalize(%s)" % ",".join("%g" % v for v in MEAN + STD)
    loader = pinfeed.torch.Loader(pinfeed.image_folder(str(photo_folder), pipeline), batch_size=10, shuffle=True, seed=1,
                                  workers=2, drop_last=True)
    assert len(loader) == 3
    # The DataLoader's batches of the same recipe: the reference for shapes and dtypes.
    reference = torchvision.datasets.ImageFolder(
        str(photo_folder), transform=v2.Compose([v2.PILToTensor(), v2.CenterCrop(224), v2.Resize(64),
                                                 v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)]))
    want_images, want_labels = next(iter(torch.utils.data.DataLoader(reference, batch_size=10, shuffle=True)))
    model = torchvision.models.resnet18(num_classes=3)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    epoch = 0
    while len(losses) < 20:
        loader.set_epoch(epoch)
        for batch in loader:
            images, labels = batch["image"], batch["label"]
            assert images.shape == want_images.shape and images.dtype == want_images.dtype
            assert labels.shape == want_labels.shape and labels.dtype == want_labels.dtype
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if len(losses) == 20:
                break
        epoch += 1
    assert all(math.isfinite(v) for v in losses)
    assert np.mean(losses[-5:]) < np.mean(losses[:5]), losses


def test_state_dict_resumes_the_uninterrupted_runs_batches_and_epochs_advance():
    def sample(i):
        return {"x": np.full((3,), i, np.int64), "label": i % 4}
    src = pinfeed.from_function(23, [("x", "i64", [3]), ("label", "i64", [])], sample)
    def run(loader, epochs):
        out = []
        for e in epochs:
            loader.set_epoch(e)
            out += [b["x"][:, 0].tolist() for b in loader]
        return out
    whole = run(pinfeed.torch.Loader(src, batch_size=5, shuffle=True, seed=9), [0, 1])
    assert len(whole) == 10 and sorted(sum(whole[:5], [])) == list(range(23))
    first = pinfeed.torch.Loader(src, batch_size=5, shuffle=True, seed=9)
    first.set_epoch(0)
    it = iter(first)
    taken = [next(it)["x"][:, 0].tolist() for _ in range(2)]
    state = first.state_dict()
    second = pinfeed.torch.Loader(src, batch_size=5, shuffle=True, seed=9, as_tuple=True)
    second.load_state_dict(state)
    rest = [x[:, 0].tolist() for x, _ in second]  # the resumed epoch's rest
    rest += [x[:, 0].tolist() for x, _ in second]  # the next pass runs the next epoch
    assert taken + rest == whole
    # copy=True: tensors of their own (writable, and kept past any number of batches).
    kept = [b["x"] for b in pinfeed.torch.Loader(src, batch_size=5, copy=True)]
    assert [t[:, 0].tolist() for t in kept] == [[i for i in range(s, min(s + 5, 23))] for s in range(0, 23, 5)]
    kept[0][0, 0] = -1
