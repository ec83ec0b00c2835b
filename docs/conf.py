"""Sphinx configuration for the exactident documentation.

Build (warnings are errors)::

    pip install '.[docs]'
    sphinx-build -W --keep-going -b html docs docs/_build/html

Pages are Markdown (MyST); the API reference (``docs/api/``) is generated
from the numpydoc docstrings by autodoc + numpydoc.
"""

from __future__ import annotations

import os
import sys

# Document the source tree next to this file, even when another exactident is installed.
sys.path.insert(0, os.path.abspath(".."))

import exactident  # noqa: E402

project = "exactident"
author = "exactident contributors"
copyright = "2026, exactident contributors"
version = release = exactident.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
    "numpydoc",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# --- MyST -----------------------------------------------------------------------------------
# `dollarmath` would turn the pages' `$ exactident ...` shell prompts into math: keep it off.
myst_enable_extensions = ["colon_fence"]
# `[text](page.md#a-heading)` links resolve to headings down to level 3.
myst_heading_anchors = 3

# --- autodoc / numpydoc -------------------------------------------------------------------
# torch and matplotlib are optional extras imported lazily; mock them so the build never needs them.
autodoc_mock_imports = ["torch", "matplotlib"]
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"show-inheritance": True}
# Class pages list their methods through autodoc (:members:), not numpydoc's autosummary tables
# (those need stub pages that we do not generate).
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False


def _dataclass_factories(app, what, name, obj, options, signature, return_annotation):
    """Show ``field(default_factory=f)`` defaults as ``f()``.

    A dataclass signature says ``= <factory>``, which is not Python: Sphinx then falls back to
    splitting the signature at commas and cross-references fragments such as ``dict[str``.
    """
    fields = getattr(obj, "__dataclass_fields__", None)
    if what != "class" or not fields or signature is None or "<factory>" not in signature:
        return None
    for f in fields.values():
        factory = f.default_factory
        if f.init and callable(factory):
            label = getattr(factory, "__name__", "")
            signature = signature.replace("<factory>", f"{label}()" if label.isidentifier() else "...", 1)
    return signature, return_annotation


def setup(app):
    app.connect("autodoc-process-signature", _dataclass_factories)


# --- nitpicky cross-references ----------------------------------------------------------------
# Every reference must resolve (-n). The build is offline (no intersphinx), so references into the
# standard library and third-party packages, which come from the type hints of signatures, are
# accepted as they are; references to exactident itself must all resolve.
nitpicky = True
nitpick_ignore_regex = [
    ("py:class", r"(collections|collections\.abc|argparse|fractions|os|pathlib|random|types|typing|zipfile)\.\w+"),
    ("py:class", r"(flint|numpy|nx|networkx|hypothesis|_pytest|pytest)\..*"),
    ("py:class", r"SearchStrategy"),  # hypothesis's, named in exactident.testing.strategies under TYPE_CHECKING
    # TypeVars of generic helpers (``progress_iter(items: Iterable[T]) -> Iterator[T]``)
    ("py:class", r"exactident\.[\w.]+\.T"),
]

# --- HTML -------------------------------------------------------------------------------------
html_theme = "alabaster"
html_title = f"exactident {release}"
html_static_path: list[str] = []
