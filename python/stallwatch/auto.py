"""Zero-code instrumentation (issue 41): every torch DataLoader iterator the process creates
reports its waits and steps as stallwatch.watch() does, with no change to the training script.

Turned on by STALLWATCH_AUTO=1, read at interpreter start by the sitecustomize.py in
stallwatch/_bootstrap, which `stallwatch run -- python train.py` (or an operator's prolog,
docs/DATALOADER.md) puts first on PYTHONPATH; the variable and the path are inherited by
every rank torchrun, srun or mpirun starts. Nothing is imported eagerly: a finder waits for
torch.utils.data.dataloader to be imported and then wraps DataLoader.__iter__. A process that
never imports torch is left alone.

What counts as a training step: a batch taken while autograd is on. A loader iterated under
torch.no_grad() or inference_mode() (an evaluation: Lightning's and Hugging Face Trainer's
validation loops run so) is passed through untimed, so train and eval loaders are told apart
without naming them. Each step: the wait is the time inside next(), the step the time from
the batch's return to the next call, as watch() measures them.
"""

import importlib.abc
import os
import sys
import time

_TARGET = "torch.utils.data.dataloader"
_installed = False


class _Watched:
    """A DataLoader iterator that times the loop around it; every other attribute is the
    original iterator's (Lightning and Trainer read some of them)."""

    __slots__ = ("_it", "_reporter", "_grad", "_count", "_returned", "_wait", "_samples")

    def __init__(self, iterator, reporter, grad_enabled, count):
        self._it = iterator
        self._reporter = reporter
        self._grad = grad_enabled
        self._count = count
        self._returned = None  # when the last batch was handed to the loop (perf_counter)
        self._wait = 0.0
        self._samples = 0

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._it)

    def __getattr__(self, name):
        return getattr(self._it, name)

    def __next__(self):
        asked = time.perf_counter()
        if self._returned is not None:  # the loop's step on the last batch has ended
            self._reporter.record_step(self._wait, asked - self._returned, self._samples)
            self._returned = None
        try:
            batch = next(self._it)
        except StopIteration:
            self._reporter.flush()
            raise
        got = time.perf_counter()
        if self._grad():
            self._wait = got - asked
            try:
                self._samples = self._count(batch)
            except Exception:
                self._samples = 0
            self._returned = got
        return batch


def _patch(module):
    loader_class = getattr(module, "DataLoader", None)
    if loader_class is None or getattr(loader_class, "_stallwatch_wrapped", False):
        return
    import torch

    from . import _batch_size, default_reporter

    original = loader_class.__iter__

    def __iter__(self):
        iterator = original(self)
        try:
            return _Watched(iterator, default_reporter(), torch.is_grad_enabled, _batch_size)
        except Exception:  # never break the loop over the monitor
            return iterator

    __iter__.__wrapped__ = original
    loader_class.__iter__ = __iter__
    loader_class._stallwatch_wrapped = True


class _Finder(importlib.abc.MetaPathFinder):
    """Patches the dataloader module once it has been loaded by the ordinary finders."""

    def find_spec(self, name, path=None, target=None):
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)
        try:
            import importlib.util

            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_module(module):
            original_exec(module)
            try:
                _patch(module)
            finally:
                if self in sys.meta_path:
                    sys.meta_path.remove(self)

        loader.exec_module = exec_module
        return spec


def install():
    """Wraps every DataLoader iterator from now on (at once if torch is already imported)."""
    global _installed
    if _installed:
        return
    _installed = True
    if _TARGET in sys.modules:
        _patch(sys.modules[_TARGET])
    else:
        sys.meta_path.insert(0, _Finder())


def enabled():
    return os.environ.get("STALLWATCH_AUTO", "") not in ("", "0", "false", "no")
