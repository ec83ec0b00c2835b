"""The documentation: no unshipped references, no dead paths, the Sphinx build, the stated architecture.

- (a) nothing under ``docs/`` (nor README.md) cites files that are not shipped;
- (b) every relative Markdown link and every repository path (``docs/x.md``,
  ``cases/...``, ``examples/...``, ``benchmarks/...``, ``exactident/...``,
  ``tests/...``) named in the pages exists, and every dotted
  ``exactident.x.y`` name resolves;
- (c) ``sphinx-build -W`` passes (skipped when Sphinx, MyST or numpydoc is missing);
- the rules ``docs/architecture.md`` states about imports hold for the code.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import inspect
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BUILD = DOCS / "_build"


def _doc_files() -> list[Path]:
    """Every text file under docs/ (not the build output), and README.md."""
    files = [p for p in sorted(DOCS.rglob("*")) if p.is_file() and BUILD not in p.parents
             and p.suffix in {".md", ".py", ".rst", ".txt"}]
    return files + [ROOT / "README.md"]


def _pages() -> list[Path]:
    return [p for p in _doc_files() if p.suffix == ".md"]


def _rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


# ---------------------------------------------------------------------------------------------
# (a) no reference to files that are not shipped

FORBIDDEN = ("SPEC.md", "PITFALLS.md", "SPEC §", "../shared")


def test_docs_cite_no_unshipped_files():
    hits = [f"{_rel(p)}:{n}: {word!r}" for p in _doc_files()
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            for word in FORBIDDEN if word in line]
    assert not hits, "docs cite unshipped files:\n" + "\n".join(hits)


# ---------------------------------------------------------------------------------------------
# (b) links and paths exist

_LINK = re.compile(r"\]\(([^)\s]+)\)")
_PATH = re.compile(r"(?<![\w/.-])((?:docs|cases|examples|benchmarks|exactident|tests)/[\w.*/-]*)")
_DOTTED = re.compile(r"(?<![\w.])exactident(?:\.[A-Za-z_]\w*)+")


def test_relative_markdown_links_exist():
    missing = []
    for page in _pages():
        for target in _LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a URL or an anchor on the same page
            path = target.split("#", 1)[0]
            if not (page.parent / path).exists():
                missing.append(f"{_rel(page)}: ({target})")
    assert not missing, "dead links:\n" + "\n".join(missing)


def test_repository_paths_named_in_the_docs_exist():
    missing = []
    for page in _pages():
        for path in set(_PATH.findall(page.read_text(encoding="utf-8"))):
            path = path.rstrip(".")
            if path.startswith("docs/_build/"):
                continue  # build output, made by the command the page shows
            found = any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()
            if not found:
                missing.append(f"{_rel(page)}: {path}")
    assert not missing, "paths named in the docs do not exist:\n" + "\n".join(missing)


def _resolve(name: str) -> None:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            fields = getattr(obj, "__dataclass_fields__", {}) if isinstance(obj, type) else {}
            obj = fields[attr] if attr in fields and not hasattr(obj, attr) else getattr(obj, attr)
        return
    raise ImportError(name)


def test_dotted_names_in_the_docs_resolve():
    bad = []
    for page in _pages():
        for name in sorted(set(_DOTTED.findall(page.read_text(encoding="utf-8")))):
            try:
                _resolve(name)
            except (ImportError, AttributeError, KeyError) as exc:
                bad.append(f"{_rel(page)}: {name} ({exc!r})")
    assert not bad, "names in the docs that do not exist:\n" + "\n".join(bad)


def test_markdown_table_rows_have_the_header_cell_count():
    # In a table a `|` splits cells even inside `code`: it must be written `\|` there.
    bad = []
    for page in _pages():
        ncols = None
        lines = page.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines, 1):
            if not line.startswith("|"):
                ncols = None
                continue
            cells = len(re.split(r"(?<!\\)\|", line.strip())) - 2
            if ncols is None:
                ncols = cells
            elif cells != ncols:
                bad.append(f"{_rel(page)}:{n}: {cells} cells, header has {ncols}")
    assert not bad, "\n".join(bad)


# ---------------------------------------------------------------------------------------------
# (c) the Sphinx build, warnings as errors


# Sphinx's own deprecation notices about extensions (e.g. myst-parser using ``resolver.app``) are
# raised as Python warnings during the build; they are not documentation warnings, and not ours.
@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning", "ignore::DeprecationWarning")
def test_sphinx_build_has_no_warnings(tmp_path):
    # .ci/run builds the docs only here: there (EXACTIDENT_REQUIRE_DOCS=1) a missing docs extra is a failure
    required = os.environ.get("EXACTIDENT_REQUIRE_DOCS") == "1"
    for module in ("sphinx", "myst_parser", "numpydoc"):
        if required:
            __import__(module)
        else:
            pytest.importorskip(module)
    from sphinx.cmd.build import build_main

    saved = list(sys.path)  # docs/conf.py puts the source tree first on sys.path
    try:
        status = build_main(["-W", "--keep-going", "-q", "-b", "html",
                             "-d", str(tmp_path / "doctrees"), str(DOCS), str(tmp_path / "html")])
    finally:
        sys.path[:] = saved
    assert status == 0, "sphinx-build -W failed (warnings are printed above)"
    assert (tmp_path / "html" / "api" / "model.html").exists()


def _package_modules() -> list[str]:
    return sorted(".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                  for p in (ROOT / "exactident").rglob("*.py") if p.name != "__main__.py")


def _data_docs(module: str) -> dict[str, object]:
    """Module-level name -> its doc comment (``#:`` above or on the line, or a string below), or,
    for a name imported with ``from m import name``, the pair ``(m, name)`` to follow."""
    src = (ROOT / (module.replace(".", "/") + ".py"))
    src = src if src.exists() else ROOT / module.replace(".", "/") / "__init__.py"
    lines = src.read_text(encoding="utf-8").splitlines()
    body = ast.parse("\n".join(lines)).body
    out: dict[str, object] = {}
    for k, node in enumerate(body):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.update({a.asname or a.name: (node.module, a.name) for a in node.names})
            continue
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        comment = [line.split("#:", 1)[1] for line in lines[node.lineno - 1:node.lineno] if "#:" in line]
        j = node.lineno - 2
        while j >= 0 and lines[j].lstrip().startswith("#:"):
            comment.insert(0, lines[j].lstrip()[2:])
            j -= 1
        after = body[k + 1] if k + 1 < len(body) else None
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
            comment.append(after.value.value)
        out.update({t.id: " ".join(comment).strip() for t in targets if isinstance(t, ast.Name)})
    return out


def _has_doc(module: str, name: str) -> bool:
    obj = getattr(importlib.import_module(module), name)
    if inspect.ismodule(obj):  # a subpackage re-exported (exactident.explain, exactident.crosscheck)
        return bool((obj.__doc__ or "").strip())
    if inspect.isclass(obj) or inspect.isroutine(obj):
        doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
        if dataclasses.is_dataclass(obj) and (doc or "").startswith(f"{obj.__name__}("):
            return False  # the signature dataclasses write when the class has no docstring
        return bool((doc or "").strip())
    for _ in range(10):  # data: follow re-exports to the module that assigns it
        doc = _data_docs(module).get(name)
        if not isinstance(doc, tuple):
            return bool(doc)
        module, name = doc
    return False


def test_every_exported_name_has_a_docstring():
    # Functions and classes: a docstring.  Data (constants, type aliases): a ``#:`` comment or a
    # string right after the assignment, which autodoc shows in the API reference.
    missing = [f"{m}.{name}" for m in _package_modules()
               for name in getattr(importlib.import_module(m), "__all__", ()) if not _has_doc(m, name)]
    assert not missing, "names in __all__ without a docstring:\n" + "\n".join(missing)


def test_api_reference_covers_every_module():
    documented = set()
    for page in (DOCS / "api").glob("*.md"):
        documented |= set(re.findall(r"automodule:: (exactident[\w.]*)", page.read_text(encoding="utf-8")))
    modules = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
               for p in (ROOT / "exactident").rglob("*.py") if p.name != "__main__.py"}
    assert modules - documented == set()


# ---------------------------------------------------------------------------------------------
# The import rules stated in docs/architecture.md

# budget (stage names and the time budget, standard library only) is at the bottom with errors: every
# layer may announce its stage.  io sits above model: io/case.py builds a Network (and model never imports io).
# progress (the stage display of the library calls) only listens to budget; api holds the library calls.
# check holds one pipeline for the MLP and the layer graph (its layer-graph stages are check.free_route).
LAYER = {"errors": 0, "budget": 1, "progress": 2, "linalg": 2, "model": 3, "ranks": 4, "io": 4,
         "boundary": 5, "verify": 5, "numeric": 5, "check": 6, "run_cases": 7,
         "crosscheck": 7, "explain": 7, "api": 8, "suites": 8, "symmetry": 8, "testing": 8.5, "track": 8.5, "cli": 9}


@functools.lru_cache(maxsize=1)
def _imports() -> list[tuple[str, str]]:
    """(module, imported module) for every import in exactident/, at any depth."""
    out = []
    for path in (ROOT / "exactident").rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                out += [(module, a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                out += [(module, f"{node.module}.{a.name}") for a in node.names]
    return out


def _wing(module: str) -> str:
    parts = module.split(".")
    return parts[1] if parts[0] == "exactident" and len(parts) > 1 else parts[0]


def test_architecture_import_rules_hold():
    up, linalg, verify = [], [], []
    for src, dst in _imports():
        if not (src.startswith("exactident.") and dst.startswith("exactident.")):
            continue
        a, b = _wing(src), _wing(dst)
        if a in LAYER and b in LAYER and a != b and LAYER[b] >= LAYER[a]:
            up.append(f"{src} -> {dst}")
        if a == "linalg" and b not in ("linalg", "errors", "budget"):  # budget: stage names only
            linalg.append(f"{src} -> {dst}")
        if a == "verify" and b in ("boundary", "check", "numeric", "crosscheck"):
            verify.append(f"{src} -> {dst}")
        if src in ("exactident.verify.arith", "exactident.verify.entering", "exactident.verify.line") \
                and b not in ("verify", "errors") and not dst.startswith("exactident.model.line_forward"):
            verify.append(f"{src} -> {dst}")  # the line primitive is shared, like blas_modp (architecture.md)
    assert not up, "imports that do not go down the layers of docs/architecture.md:\n" + "\n".join(up)
    assert not linalg, "linalg must know nothing of networks:\n" + "\n".join(linalg)
    assert not verify, "verify shares more with the engine than docs/architecture.md says:\n" + "\n".join(verify)


@pytest.mark.parametrize("library, where", [
    ("networkx", {"exactident.model.graph"}),
    ("scipy", {"exactident.boundary.entering", "exactident.explain.gamma_rows", "exactident.symmetry.region_lp"}),
    ("highspy", {"exactident.symmetry.region_lp"}),
    ("matplotlib", {"exactident.crosscheck.plot", "exactident.track.plot"}),
    ("torch", {"exactident.numeric.torch_backend",
               "exactident.io.importers.torch_state_dict", "exactident.io.importers.reference",
               "exactident.io.importers.torch_trace", "exactident.io.importers.torch_graph"}),
    ("onnx", {"exactident.io.importers.onnx_load", "exactident.io.importers.onnx_model",
              "exactident.io.importers.reference", "exactident.io.importers.onnx_graph"}),
    ("safetensors", {"exactident.io.importers.safetensors_file"}),
    ("h5py", {"exactident.io.importers.keras_file"}),
    ("sympy", {"exactident.verify.arith"}),
])
def test_optional_libraries_load_where_the_docs_say(library, where):
    assert {src for src, dst in _imports() if dst.split(".")[0] == library} == where

