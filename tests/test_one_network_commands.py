"""A plain MLP written by hand as a layer graph (format 2: ``linear`` and ``relu`` layers, ``T = I``) gets the
MLP's answer through every command.

The layer-graph case is written here from the format-1 case's own weights, biases and sample (no project code);
each command's JSON output on the two files must be the same, up to the fields that name the file or time the run.
The format-1 outputs are the MLP engine's, already checked against hand derivations and independent oracles
elsewhere (e.g. ``boundary-hyperplane-2d``'s expected block, derived in its description, is asserted here too).
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from exactident.cli import main

CASES = Path(__file__).resolve().parent.parent / "cases"
NAMES = ["boundary-hyperplane-2d", "boundary-dead-neuron", "tiny-111-kink", "boundary-two-ties-one-neuron"]
COMMANDS = [["check", "--json", "--no-numeric"], ["explain", "--json"], ["crosscheck", "--json"],
            ["canonical", "--json"], ["fdim", "--json"], ["design", "--json"]]
VOLATILE = {"source", "seconds", "elapsed", "wall_seconds"}  # the file's path, the run's timing


def _as_layer_graph(case: dict) -> dict:
    """The format-2 twin of a format-1 case: ``fc_l`` (linear) then ``act_l`` (relu) per hidden layer."""
    widths, layers, prev = case["widths"], [], "input"
    for l, (W, b) in enumerate(zip(case["weights"], case["biases"]), 1):
        layers.append({"name": f"fc{l}", "op": "linear", "inputs": [prev], "weight": W, "bias": b})
        prev = f"fc{l}"
        if l < len(widths) - 1:
            layers.append({"name": f"act{l}", "op": "relu", "inputs": [prev]})
            prev = f"act{l}"
    return {"format": "exactident-case/2", "name": case["name"], "input_shape": [widths[0]], "layers": layers,
            "output": prev, "sample": case["sample"]}


def _run(argv: list[str]) -> tuple[int, object]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(argv)
    return code, json.loads(out.getvalue())


def _strip(value: object) -> object:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    root = tmp_path_factory.mktemp("one-network")
    out = {}
    for name in NAMES:
        case = json.loads((CASES / f"{name}.json").read_text())
        mlp = {k: v for k, v in case.items() if k != "expected"}
        (root / name).mkdir()
        m, g = root / name / "mlp.json", root / name / "graph.json"
        m.write_text(json.dumps(mlp))
        g.write_text(json.dumps(_as_layer_graph(case)))
        out[name] = (m, g)
    return out


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_every_command_gives_the_mlp_answer_on_its_layer_graph_form(pairs, name, command):
    m, g = pairs[name]
    code_m, out_m = _run([*command, str(m)])
    code_g, out_g = _run([*command, str(g)])
    assert code_m == code_g
    assert _strip(out_g) == _strip(out_m)


def test_the_hand_derived_answer_through_the_layer_graph_form(pairs):
    """boundary-hyperplane-2d's description derives rank 4 = dim on both sides of its one tie: identifiable."""
    _, g = pairs["boundary-hyperplane-2d"]
    _, report = _run(["check", "--json", "--no-numeric", str(g)])
    r = report[0] if isinstance(report, list) else report
    assert (r["verdict"], r["rank_gamma"], r["dim"], r["n_ties"]) == ("identifiable", 4, 4, 1)


@pytest.mark.parametrize("name", NAMES)
def test_the_two_forms_are_one_orbit_and_the_layer_graph_report_verifies(pairs, name, tmp_path):
    m, g = pairs[name]
    _, orbit = _run(["equiv", "--json", str(m), str(g)])
    assert orbit["same_orbit"] is True
    _, report = _run(["check", "--json", "--no-numeric", str(g)])
    rep = tmp_path / "report.json"
    rep.write_text(json.dumps(report))
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["verify-certificate", str(g), str(rep)]) == 0
