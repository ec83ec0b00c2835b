"""The package's layout: no import cycle, modules under 500 lines, light start-up.

The layering of the wings is checked against docs/architecture.md in tests/test_docs.py.

Imports are read from the source (module level *and* inside functions), so a
cycle hidden behind a lazy import is still found.
"""

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

import exactident

PACKAGE = Path(exactident.__file__).parent

def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str) -> set[str]:
    is_pkg = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[: len(name.split(".")) - node.level + (1 if is_pkg else 0)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}  # `from pkg import submodule`
    return out


def import_graph() -> nx.DiGraph:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    G = nx.DiGraph()
    G.add_nodes_from(modules)
    for name, path in modules.items():
        for target in _imports(path, name):
            if target in modules and target != name and target != "exactident":
                G.add_edge(name, target)
    return G


def test_no_import_cycle():
    cycles = list(nx.simple_cycles(import_graph()))
    assert cycles == [], f"import cycles: {cycles}"


def test_no_module_over_500_lines():
    long = {p.name: n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500}
    assert long == {}


def test_cli_start_up_does_not_load_heavy_libraries():
    code = ("import sys, exactident.cli; "
            "print(sorted(m for m in ('networkx', 'matplotlib', 'torch', 'scipy', 'sympy', 'sklearn', 'onnx', "
            "'safetensors', 'h5py', 'dask') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_help_does_not_load_heavy_libraries():
    code = ("import sys\nfrom exactident.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('networkx', 'matplotlib', 'torch', 'scipy', 'sympy', 'dask', 'sklearn') "
            "if m in sys.modules),"
            " file=sys.stderr)")
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stderr
    assert err.strip().splitlines()[-1] == "[]"


def _loaded_after(code: str) -> set[str]:
    # a fresh interpreter, so what earlier tests imported does not count
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True, cwd=PACKAGE.parent).stdout
    return set(out.split())


# what `import exactident` and `exactident check` on a tie-free case must not load (docs/architecture.md)
_NEVER_AT_IMPORT = ("sympy", "networkx", "torch", "scipy", "pandas", "sklearn", "onnx", "matplotlib",
                    "exactident.io.importers", "exactident.explain", "exactident.symmetry", "exactident.suites",
                    "exactident.crosscheck", "exactident.boundary", "exactident.check", "flint", "numpy")


def test_import_exactident_loads_only_the_errors():
    # every public name is loaded on first use (PEP 562 __getattr__ in exactident/__init__.py)
    loaded = _loaded_after("import exactident")
    assert sorted(m for m in loaded if m.startswith("exactident")) == ["exactident", "exactident.errors"]
    assert sorted(m for m in loaded if m.split(".")[0] in _NEVER_AT_IMPORT or m in _NEVER_AT_IMPORT) == []


def test_public_names_load_on_first_use():
    code = ("import exactident.run_cases\n"  # loads the module exactident.check first: the name stays the function
            "import exactident.explain.render\n"  # the subpackage imported first: still callable
            "import exactident, inspect\n"
            "from exactident import Case, Network, Report, check, design, explain, crosscheck, from_sklearn, "
            "load_case\n"
            "assert inspect.isfunction(exactident.check) and exactident.check is check\n"
            "assert callable(explain) and callable(crosscheck) and inspect.ismodule(explain)\n"
            "assert sorted(set(exactident.__all__) - set(dir(exactident))) == []\n"
            "try:\n    exactident.no_such_name\nexcept AttributeError:\n    pass\nelse:\n    raise SystemExit(1)")
    loaded = _loaded_after(code)
    assert "exactident.io.importers" in loaded and "sklearn" not in loaded  # from_sklearn: the importer, lazily


@pytest.mark.parametrize("options", [["--no-numeric"], []], ids=["exact only", "with the float cross-check"])
def test_check_loads_only_what_it_uses(options):
    # a tie-free case: no boundary analysis, no explain/suites/symmetry/crosscheck, no optional library
    code = ("import contextlib, io\nfrom exactident.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    assert main(['check', *{options!r}, 'cases/diabetes-mlp-10-8-1.json']) == 0")
    loaded = _loaded_after(code)
    unused = ("sympy", "networkx", "torch", "scipy", "pandas", "sklearn", "onnx", "matplotlib", "keras", "jax",
              "h5py", "safetensors", "rich", "tqdm", "exactident.explain",
              "exactident.symmetry", "exactident.suites", "exactident.crosscheck", "exactident.boundary",
              "exactident.model.compile", "exactident.model.architecture",  # layer graphs: not for an MLP
              "exactident.numeric.torch_backend", "exactident.verify")
    assert sorted(m for m in loaded if any(m == u or m.startswith(u + ".") for u in unused)) == []
    # a case file is read by exactident.io.case: no importer of model or sample files is loaded (the package
    # itself is, for the model options of ``check`` and the names of model formats: command, formats)
    importers = sorted(m for m in loaded if m.startswith("exactident.io.importers."))
    assert importers == ["exactident.io.importers.command", "exactident.io.importers.formats"]
    assert {"zipfile", "csv"}.isdisjoint(loaded)  # what the importers read files with


def test_help_lists_subcommands_without_importing_them():
    code = ("import contextlib, io\nfrom exactident.cli import main\nout = io.StringIO()\n"
            "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n    main(['--help'])\n"
            "assert 'hidden-symmetries' in out.getvalue() and 'canonical' in out.getvalue()")
    loaded = _loaded_after(code)
    assert sorted(m for m in loaded if m.startswith(("exactident.explain", "exactident.symmetry", "exactident.suites",
                                                     "exactident.crosscheck", "exactident.io.importers"))) == []


def test_the_repository_holds_no_stray_file_or_outside_link():
    """A developer's leftovers were committed once (a traceback ``d.err`` at the top, ``cases/cases`` linking to
    another machine's folder): the top level holds only the project's folders and files, and no tracked file is
    a symbolic link (the clone of a user would point nowhere)."""
    root = PACKAGE.parent
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    try:
        tracked = subprocess.run(["git", "-C", str(root), "ls-files", "-s"], capture_output=True, text=True,
                                 check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("git is not available")
    links = [line.split("\t", 1)[1] for line in tracked if line.startswith("120000")]  # mode of a symlink
    assert not links, f"symbolic links tracked: {links}"
    top = {line.split("\t", 1)[1].split("/", 1)[0] for line in tracked}
    allowed = {".ci", ".gitignore", "README.md", "pyproject.toml", "benchmarks", "cases", "docs", "exactident",
               "examples", "tests"}
    assert top <= allowed, f"unexpected at the top level: {sorted(top - allowed)}"
