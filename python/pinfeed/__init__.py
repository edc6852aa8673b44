"""pinfeed from Python: a thin layer over pinfeed's C++ data loader.

Sources (``image_folder``, ``file_list``, ``shards``, ``synthetic``, ``from_function``) feed a
``Loader``; each batch's fields cross to numpy or torch by DLPack without a copy
(``numpy.from_dlpack(batch["image"])``, ``torch.from_dlpack(...)``). Batches are a pure function of
(seed, epoch, index) for any worker count, ``state()`` / ``resume()`` continue exactly, and every
error is a ``pinfeed.Error``. ``pinfeed.torch`` has the loader a PyTorch training loop uses.
"""

import json as _json

from ._pinfeed import (  # noqa: F401  (the module's names are the package's)
    __version__,
    BadTransformArgument,
    Batch,
    BatchesHeldError,
    CudaError,
    DoctorReport,
    Error,
    FatalError,
    Field,
    InvalidArgument,
    LengthError,
    LoaderClosed,
    LogicError,
    OutOfRange,
    RuntimeError,
    SampleError,
    SamplerFault,
    Source,
    file_list,
    from_function,
    image_folder,
    shards,
    synthetic,
)
from . import _pinfeed

__all__ = [
    "Loader", "Batch", "Field", "Source", "DoctorReport", "image_folder", "file_list", "shards", "synthetic",
    "from_function", "doctor", "node_plan", "Error", "InvalidArgument", "BadTransformArgument", "OutOfRange",
    "LengthError", "LogicError", "BatchesHeldError", "CudaError", "SampleError", "FatalError", "LoaderClosed",
    "SamplerFault",
]




class Loader:
    """Batches of `source` in order, each a pure function of (seed, epoch, index).

    Options are the C++ loader's (loader_options): batch_size, workers (a count, 0 for the node
    plan's cores, or "auto"), prefetch (a count or "auto"), seed, epoch, device ("auto", "cpu",
    "cuda", "cuda:N", "local_rank"), shuffle, drop_last, rank and world (-1: from torchrun's or
    another launcher's environment), drop_remainder, max_batches_in_use, memory_budget (bytes).
    Iterating gives the rest of the current epoch; ``next()`` gives one batch or None at its end.
    """

    def __init__(self, source, batch_size=32, *, workers=0, prefetch=2, seed=0, epoch=0, device="auto", shuffle=False,
                 drop_last=False, rank=-1, world=1, drop_remainder=False, max_batches_in_use=1, memory_budget=None):
        if not isinstance(source, Source):
            raise InvalidArgument("Loader: source must be a pinfeed.Source (image_folder, file_list, shards, synthetic, "
                                  "from_function), not %s" % type(source).__name__)
        self.source = source
        self._loader = _pinfeed._Loader(source, batch_size, workers, prefetch, seed, epoch, device, shuffle, drop_last,
                                        rank, world, drop_remainder, max_batches_in_use, memory_budget)
        self.batch_size = batch_size

    def next(self):
        """The next batch of the current epoch (a pinfeed.Batch), or None at its end."""
        return self._loader.next()

    def __iter__(self):
        while True:
            b = self._loader.next()
            if b is None:
                return
            yield b

    def __len__(self):
        return self._loader.batches_per_epoch

    def start_epoch(self, epoch, first_batch=None):
        """Starts `epoch` (a resumed position in it is kept; first_batch restarts there)."""
        if first_batch is None:
            self._loader.start_epoch(epoch)
        else:
            self._loader.restart_epoch(epoch, first_batch)

    def state(self):
        """The loader's position (a JSON string): resume() of it continues exactly here."""
        return self._loader.state()

    def resume(self, state):
        self._loader.resume(state)

    epoch = property(lambda self: self._loader.epoch)
    next_batch = property(lambda self: self._loader.next_batch)
    batches_per_epoch = property(lambda self: self._loader.batches_per_epoch)
    device = property(lambda self: self._loader.device)
    workers = property(lambda self: self._loader.workers)
    prefetch = property(lambda self: self._loader.prefetch)
    stream = property(lambda self: self._loader.stream, doc="The consumer's CUDA stream (an int; 0 on the CPU).")

    def stats(self):
        """The loader's counters (batches, samples, bytes, stage times, the consumer's wait) as a dict."""
        return self._loader.stats()

    def stats_summary(self):
        return self._loader.stats_summary()

    def tuning(self):
        return _json.loads(self._loader.tuning_json())

    def reset_stats(self):
        self._loader.reset_stats()

    def close(self):
        """Stops the workers now (a batch or field still held stays valid)."""
        self._loader.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def doctor(source, batch_size=32, *, workers=0, seed=0, device="auto", step_ms=0.0, steps=20, verify=True,
           per_transform=True):
    """Runs pinfeed's doctor over `source` and returns its report (str(report), .to_json(), .to_html())."""
    return _pinfeed._doctor(source, batch_size, workers, seed, device, step_ms, steps, verify, per_transform)


def node_plan():
    """This process's node plan (cores, memory, local ranks, GPU locality), each number with its source."""
    return _json.loads(_pinfeed.node_plan_json())
