"""The package's layout: no import cycle, light start-up, wings importing only downwards.

Imports are read from the source (module level *and* inside functions), so a
cycle hidden behind a lazy import is still found.
"""

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx

import exactident

PACKAGE = Path(exactident.__file__).parent

# Lower wings first; a module may import its own wing and the wings listed before it.
WINGS = ["errors", "budget", "io", "linalg", "model", "ranks", "boundary", "verify", "numeric", "check", "run_cases",
         "crosscheck", "cli"]
# Exceptions to "downwards only", each with its reason.
ALLOWED_UP = {
    # reading a case file needs the Network it builds (io.case -> model.network), and model
    # never imports io.case, so this edge is one way
    ("io", "model"),
}


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


def _wing(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_no_import_cycle():
    cycles = list(nx.simple_cycles(import_graph()))
    assert cycles == [], f"import cycles: {cycles}"


def test_wings_import_downwards():
    rank = {w: k for k, w in enumerate(WINGS)}
    bad = []
    for a, b in import_graph().edges:
        wa, wb = _wing(a), _wing(b)
        if wa in rank and wb in rank and rank[wb] > rank[wa] and (wa, wb) not in ALLOWED_UP:
            bad.append(f"{a} -> {b}")
    assert bad == []


def test_linalg_knows_nothing_of_networks():
    deps = {b for a, b in import_graph().edges if _wing(a) == "linalg"}
    assert {_wing(b) for b in deps} <= {"linalg", "errors", "budget"}, deps  # budget: stage names only


def test_no_module_over_500_lines():
    long = {p.name: n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500}
    assert long == {}


def test_cli_start_up_does_not_load_heavy_libraries():
    code = ("import sys, exactident.cli; "
            "print(sorted(m for m in ('networkx', 'matplotlib', 'torch', 'scipy', 'sympy', 'sklearn') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_help_does_not_load_heavy_libraries():
    code = ("import sys\nfrom exactident.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('networkx', 'matplotlib', 'torch', 'scipy', 'sympy') if m in sys.modules),"
            " file=sys.stderr)")
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stderr
    assert err.strip().splitlines()[-1] == "[]"
