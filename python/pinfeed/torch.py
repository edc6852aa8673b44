"""pinfeed.torch: a loader a PyTorch training loop uses in place of torch.utils.data.DataLoader.

    import pinfeed, pinfeed.torch
    source = pinfeed.image_folder("/data/train", "rrc(224),hflip,normalize(0.485,0.456,0.406,0.229,0.224,0.225)")
    loader = pinfeed.torch.Loader(source, batch_size=256, shuffle=True, seed=0)
    for epoch in range(start, epochs):
        loader.set_epoch(epoch)
        for batch in loader:                      # {"image": tensor, "label": tensor} on the GPU
            train_step(batch["image"], batch["label"])
        save({"model": ..., "loader": loader.state_dict()})   # resume: loader.load_state_dict(...)

Tensors come by DLPack without a copy, ordered on torch's current CUDA stream (no host sync); each
holds its batch's slot until torch frees it. Rank and world size come from torchrun's environment
(RANK, WORLD_SIZE) as the C++ loader reads them; batches are a pure function of (seed, epoch,
index) for any worker count, and state_dict() resumes exactly, also at another world size.
"""

import torch as _torch

import pinfeed as _pinfeed


class Loader:
    """An iterable of batches (dicts of tensors, or tuples with as_tuple=True), one epoch a pass.

    len() is the batches of an epoch on this rank. set_epoch(e) chooses the epoch the next pass
    runs (a resumed position in it is kept); without it each pass after a whole epoch runs the
    next epoch. copy=True gives tensors of their own (for code that keeps batches); the default
    views hold the loader's slots, at most max_batches_in_use batches of them at a next() (the
    batch in hand is not counted). state_dict() / load_state_dict() carry the loader's position
    in a checkpoint (Lightning's and Accelerate's included).
    """

    def __init__(self, source, batch_size=32, *, shuffle=False, drop_last=False, seed=0, workers=0, prefetch=2,
                 device="auto", as_tuple=False, keys=None, copy=False, rank=-1, world_size=1, drop_remainder=False,
                 max_batches_in_use=1, memory_budget=None):
        self._loader = _pinfeed.Loader(source, batch_size, workers=workers, prefetch=prefetch, seed=seed, device=device,
                                       shuffle=shuffle, drop_last=drop_last, rank=rank, world=world_size,
                                       drop_remainder=drop_remainder, max_batches_in_use=max_batches_in_use,
                                       memory_budget=memory_budget)
        self.source = source
        self.batch_size = batch_size
        self.as_tuple = as_tuple
        self.keys = list(keys) if keys is not None else None
        self.copy = copy
        self._epoch = None  # set_epoch's, for the next pass
        self._cuda = self._loader.device.startswith("cuda")

    def __len__(self):
        return self._loader.batches_per_epoch

    @property
    def epoch(self):
        return self._loader.epoch

    def set_epoch(self, epoch):
        """The epoch the next pass runs (as DistributedSampler.set_epoch)."""
        self._epoch = int(epoch)

    def _tensor(self, field, stream):
        capsule = field.__dlpack__(stream=stream) if self._cuda else field.__dlpack__()
        t = _torch.from_dlpack(capsule)
        return t.clone() if self.copy else t

    def __iter__(self):
        loader = self._loader
        if self._epoch is not None:
            loader.start_epoch(self._epoch)
            self._epoch = None
        elif loader.next_batch >= loader.batches_per_epoch:
            loader.start_epoch(loader.epoch + 1)
        stream = None
        if self._cuda:
            index = int(loader.device.split(":")[1]) if ":" in loader.device else 0
            stream = _torch.cuda.current_stream(index).cuda_stream or 1  # the legacy default stream is 1 in DLPack
        while True:
            batch = loader.next()
            if batch is None:
                return
            names = self.keys if self.keys is not None else batch.keys()
            out = {name: self._tensor(batch[name], stream) for name in names}
            batch.release()  # the tensors keep the slot as long as they live
            item = tuple(out.values()) if self.as_tuple else out
            del batch, out  # held by the caller alone: not counted again at the next next()
            yield item
            del item

    def state_dict(self):
        """The loader's position, for a checkpoint: load_state_dict() of it continues exactly there."""
        return {"pinfeed_state": self._loader.state()}

    def load_state_dict(self, state):
        self._loader.resume(state["pinfeed_state"])
        self._epoch = None

    def stats(self):
        return self._loader.stats()

    def close(self):
        self._loader.close()
