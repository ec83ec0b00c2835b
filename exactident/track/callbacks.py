"""Callbacks that run a :class:`~exactident.track.core.Tracker` where people train: Lightning and Keras.

A plain PyTorch loop needs none: ``tracker.step(step)`` after each optimizer step is the one line.
The classes are built on first call, importing ``lightning`` (or ``pytorch_lightning``) or ``keras``
only then; ``import exactident.track`` loads neither.

Step numbering: step ``k`` is the model after ``k`` optimizer steps (step 0: before training).
Lightning's ``trainer.global_step`` counts them; the Keras callback counts the training batches
over all epochs.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from typing import Any

from exactident.errors import UnsupportedCaseError
from exactident.track.core import Tracker

__all__ = ["keras_callback", "lightning_callback"]


def _lightning() -> Any:
    import importlib

    for name in ("lightning.pytorch", "pytorch_lightning"):  # the package and its older standalone name
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise UnsupportedCaseError("lightning_callback needs lightning (pip install lightning)")


def _per(per: str) -> None:
    if per not in ("step", "epoch"):
        raise UnsupportedCaseError(f"per must be 'step' or 'epoch', not {per!r}")


@functools.lru_cache(maxsize=1)
def _lightning_class() -> type:
    pl = _lightning()

    class ExactRankCallback(pl.Callback):  # type: ignore[misc,name-defined,unused-ignore]
        """Lightning callback: a point at ``trainer.global_step`` after every training batch on the schedule."""

        def __init__(self, tracker_options: dict[str, Any], module: Callable[[Any], Any] | None, per: str) -> None:
            super().__init__()
            self.options, self.module, self.per = tracker_options, module, per
            self.tracker: Tracker | None = None

        def _tracker(self, pl_module: Any) -> Tracker:
            if self.tracker is None:
                model = pl_module if self.module is None else self.module(pl_module)
                self.tracker = Tracker(model, **self.options)
            return self.tracker

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            start = int(trainer.global_step) if self.per == "step" else int(trainer.current_epoch)
            self._tracker(pl_module).step(start, int(trainer.current_epoch))

        def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
            if self.per == "step":
                self._tracker(pl_module).step(int(trainer.global_step), int(trainer.current_epoch))

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            if self.tracker is not None:
                self.tracker.wait()  # background points still running

        def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
            if self.per == "epoch":  # the counter: epochs finished
                done = int(trainer.current_epoch) + 1
                self._tracker(pl_module).step(done, done)

        @property
        def records(self) -> list[dict[str, Any]]:
            return [] if self.tracker is None else self.tracker.records

    return ExactRankCallback


def lightning_callback(X: Any, *, every: int | None = None, at: Iterable[int] | None = None,
                       jsonl: str | os.PathLike[str] | None = None, budget: float | None = 60.0,
                       module: Callable[[Any], Any] | None = None, per: str = "step", **options: Any) -> Any:
    """A Lightning ``Callback`` tracking the certified rank of ``Gamma`` on the probe ``X``.

    Parameters
    ----------
    X, every, at, jsonl, budget
        As :class:`~exactident.track.core.Tracker`; steps are ``trainer.global_step``.
    module : callable LightningModule -> torch.nn.Module, optional
        The network to read (default: the LightningModule itself, e.g. ``lambda m: m.net`` when the
        network is an attribute and the LightningModule's ``forward`` does more).
    per : {"step", "epoch"}
        What ``every``/``at`` count: optimizer steps (``trainer.global_step``, a point after a training
        batch), or finished epochs (a point at the end of an epoch; the record's ``step`` and ``epoch``
        are then the number of epochs finished).
    **options
        More keyword arguments of :class:`~exactident.track.core.Tracker` (``name``, ``check_options``,
        ``background``; background points still running are waited for at the end of training).

    Returns
    -------
    lightning.pytorch.Callback
        Its ``records`` are the tracker's records; ``tracker`` is the Tracker (after training starts).

    Raises
    ------
    UnsupportedCaseError
        Neither ``lightning`` nor ``pytorch_lightning`` is installed; ``per`` not ``"step"`` or ``"epoch"``.
    """
    _per(per)
    cls = _lightning_class()
    return cls(dict(X=X, every=every, at=at, jsonl=jsonl, budget=budget, **options), module, per)


@functools.lru_cache(maxsize=1)
def _keras_class() -> type:
    try:
        import keras
    except ImportError:
        raise UnsupportedCaseError("keras_callback needs keras 3 (pip install keras)") from None

    class ExactRankKerasCallback(keras.callbacks.Callback):  # type: ignore[misc,name-defined,unused-ignore]
        """Keras callback: a point after every training batch on the schedule (steps counted over epochs)."""

        def __init__(self, tracker_options: dict[str, Any], per: str) -> None:
            super().__init__()
            self.options, self.per, self.steps, self.epoch = tracker_options, per, 0, 0
            self.tracker: Tracker | None = None

        def _tracker(self) -> Tracker:
            if self.tracker is None:
                self.tracker = Tracker(self.model, **self.options)
            return self.tracker

        def on_train_begin(self, logs: Any = None) -> None:
            self._tracker().step(self.steps, self.epoch)

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.epoch = int(epoch)

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self.steps += 1
            if self.per == "step":
                self._tracker().step(self.steps, self.epoch)

        def on_train_end(self, logs: Any = None) -> None:
            if self.tracker is not None:
                self.tracker.wait()  # background points still running

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            if self.per == "epoch":  # the counter: epochs finished
                self._tracker().step(int(epoch) + 1, int(epoch) + 1)

        @property
        def records(self) -> list[dict[str, Any]]:
            return [] if self.tracker is None else self.tracker.records

    return ExactRankKerasCallback


def keras_callback(X: Any, *, every: int | None = None, at: Iterable[int] | None = None,
                   jsonl: str | os.PathLike[str] | None = None, budget: float | None = 60.0, per: str = "step",
                   **options: Any) -> Any:
    """A Keras 3 ``Callback`` tracking the certified rank of ``Gamma`` of ``self.model`` on the probe ``X``.

    Parameters
    ----------
    X, every, at, jsonl, budget
        As :class:`~exactident.track.core.Tracker`; step ``k`` is the model after ``k`` training batches
        (counted over all epochs; step 0 at ``on_train_begin``).
    per : {"step", "epoch"}
        What ``every``/``at`` count: training batches (a point after a batch), or finished epochs (a point
        at the end of an epoch; the record's ``step`` and ``epoch`` are then the number of epochs finished).
    **options
        More keyword arguments of :class:`~exactident.track.core.Tracker` (``name``, ``check_options``,
        ``background``; background points still running are waited for at the end of training).

    Returns
    -------
    keras.callbacks.Callback
        Its ``records`` are the tracker's records.

    Raises
    ------
    UnsupportedCaseError
        keras is not installed; ``per`` not ``"step"`` or ``"epoch"``.
    """
    _per(per)
    return _keras_class()(dict(X=X, every=every, at=at, jsonl=jsonl, budget=budget, **options), per)
