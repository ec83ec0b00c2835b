"""The names the command line and the importers share: formats, extensions, the default size limit.

Standard library free and cheap to import: ``exactident check CASE.json`` sets up its model options
(``--format``, ``--max-bytes``, ``--assume-relu-mlp``) and tells a case file from a model file with
these alone, without loading an importer (docs/performance.md, "start-up").
"""

from __future__ import annotations

__all__ = ["ASSUME_OPTION", "DEFAULT_MAX_BYTES", "FORMATS", "PICKLE_EXTENSIONS", "SAMPLE_ONLY_EXTENSIONS"]

#: ``--format`` names and the extensions that select them.
FORMATS = {
    "onnx": (".onnx",),
    "torch": (".pt", ".pth", ".bin", ".ckpt"),
    "safetensors": (".safetensors",),
    "keras": (".keras", ".h5", ".hdf5"),
    "npz": (".npz",),
}

#: Extensions refused by name: pickles are never loaded.
PICKLE_EXTENSIONS = (".pkl", ".pickle", ".joblib", ".sav", ".dill")

#: Sample formats that are not also model formats (``.npz`` is both): given as CASE, a hint.
SAMPLE_ONLY_EXTENSIONS = (".npy", ".csv")

#: Default limit on a model or sample file (and on any one declared tensor): 64 MiB.
#: An exact analysis of a network that large would not finish anyway; raise it with
#: ``--max-bytes`` (CLI) or ``max_bytes=`` (Python).
DEFAULT_MAX_BYTES = 64 * 2**20

#: The command-line option by which the user states that a weight-only file is a plain ReLU MLP
#: (``assume_relu_mlp=True`` in Python), the same in every command that reads model files.
ASSUME_OPTION = "--assume-relu-mlp"
