"""Exact rank tracking during training: the certified rank of ``Gamma`` at scheduled steps (docs/tracking.md).

Researchers follow ``rank Gamma`` (the Jacobian of the outputs on a fixed probe sample in the
parameters; Bona-Pellissier, Malgouyres and Bachoc, NeurIPS 2022, arXiv:2206.07424) along training.
:class:`~exactident.track.core.Tracker` records at each point of a schedule the rank certified by
:func:`exactident.check` on the model's current weights read exactly, ``dim``, the verdict, the units
dead and always active on the probe, and the float64 rank beside it; records go to a list, a pandas
DataFrame and, as they finish, a JSON Lines file.

- a PyTorch loop: ``tracker = Tracker(model, X_probe, every=20, jsonl="rank.jsonl")``, then
  ``tracker.step(step)`` after each optimizer step;
- Lightning: :func:`~exactident.track.callbacks.lightning_callback`; Keras 3:
  :func:`~exactident.track.callbacks.keras_callback`;
- :func:`~exactident.track.plot.plot_tracking` and ``exactident track-plot FILE.jsonl``.

``import exactident`` does not load this package; its names load on first use (PEP 562), and
torch, keras, lightning, pandas and matplotlib only when the function that needs them runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from exactident import _lazy_name
from exactident.track.core import RECORD_FIELDS

if TYPE_CHECKING:  # the names below load on first use (PEP 562 ``__getattr__``)
    from exactident.track.callbacks import keras_callback, lightning_callback
    from exactident.track.core import Tracker, read_records, records_frame
    from exactident.track.plot import plot_tracking

__all__ = ["RECORD_FIELDS", "Tracker", "keras_callback", "lightning_callback", "plot_tracking", "read_records",
           "records_frame"]

_LAZY = {"Tracker": "exactident.track.core",
         "read_records": "exactident.track.core", "records_frame": "exactident.track.core",
         "keras_callback": "exactident.track.callbacks", "lightning_callback": "exactident.track.callbacks",
         "plot_tracking": "exactident.track.plot"}


def __getattr__(name: str) -> Any:
    return _lazy_name(globals(), _LAZY, __name__, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
