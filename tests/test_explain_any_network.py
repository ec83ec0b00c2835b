"""One ``explain`` for any network: the route follows the network's structure, and where the plain MLP's rules
cannot apply the explanation says which hypothesis fails.

Truth: the cases are written here by hand, so what each network has (a plain ReLU MLP written as a layer graph;
a leaky ReLU unit) is known by construction; the plain MLP's explanation of the same network in format 1 is the
reference for the layer graph that is one.
"""

from __future__ import annotations

import json
from pathlib import Path

from exactident.explain.core import Explanation, explain
from exactident.io.case import load_case, parse_case

ROOT = Path(__file__).resolve().parents[1]


def _as_layer_graph(path: Path) -> dict:
    obj = json.loads(path.read_text())
    layers, prev, L = [], "input", len(obj["weights"])
    for l in range(1, L + 1):
        layers.append({"name": f"fc{l}", "op": "linear", "inputs": [prev], "weight": obj["weights"][l - 1],
                       "bias": obj["biases"][l - 1]})
        prev = f"fc{l}"
        if l < L:
            layers.append({"name": f"relu{l}", "op": "relu", "inputs": [prev]})
            prev = f"relu{l}"
    return {"format": "exactident-case/2", "name": obj["name"], "input_shape": [obj["widths"][0]],
            "layers": layers, "output": prev, "sample": obj["sample"]}


def test_a_layer_graph_that_is_a_plain_mlp_gets_the_mlp_explanation():
    path = ROOT / "cases" / "tiny-111-kink.json"
    r1, mlp = explain(load_case(path))
    r2, graph = explain(parse_case(_as_layer_graph(path)))
    assert isinstance(mlp, Explanation) and isinstance(graph, Explanation)
    assert r1.verdict == r2.verdict
    assert [(e["name"], e["class"]) for e in mlp.parameters] == [(e["name"], e["class"]) for e in graph.parameters]
    assert mlp.lines == graph.lines and not any(line.startswith("not applied:") for line in graph.lines)


def test_beyond_the_plain_mlp_one_line_names_the_hypothesis_that_fails():
    obj = {"format": "exactident-case/2", "name": "leaky", "input_shape": [1],
           "layers": [{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["2"]], "bias": ["-1"]},
                      {"name": "act", "op": "leaky_relu", "inputs": ["fc1"], "negative_slope": "1/10"},
                      {"name": "fc2", "op": "linear", "inputs": ["act"], "weight": [["3"]], "bias": ["0"]}],
           "output": "fc2", "sample": [[str(x)] for x in (1, 2, -1)]}
    _, ex = explain(parse_case(obj))
    said = [line for line in ex.lines if line.startswith("not applied:")]
    assert len(said) == 1 and "Theorem 8" in said[0] and said[0].endswith("this network has leaky ReLU")
