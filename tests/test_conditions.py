"""``exactident.model.conditions``: the SPEC §2 verdict table and its guards."""

from __future__ import annotations

import pytest

from exactident.errors import InvariantViolation
from exactident.model.conditions import (
    DEGENERATE,
    IDENTIFIABLE,
    INCONCLUSIVE,
    NOT_IDENTIFIABLE,
    holds_cn,
    holds_cs,
    reason_from_ranks,
    verdict_from_ranks,
)


@pytest.mark.parametrize("rank_gamma,rank_a,dim,degenerate,verdict", [
    (5, 5, 5, False, IDENTIFIABLE),        # C_S (Theorem 9)
    (5, None, 5, False, IDENTIFIABLE),     # rank_a not needed
    (5, 8, 5, False, IDENTIFIABLE),        # R_A may exceed dim
    (4, 4, 5, False, NOT_IDENTIFIABLE),    # C_N fails (Theorem 8)
    (0, 0, 3, False, NOT_IDENTIFIABLE),    # empty sample
    (3, 4, 5, False, INCONCLUSIVE),        # R_Gamma < R_A, < dim
    (3, None, 5, False, INCONCLUSIVE),     # cannot decide C_N without R_A
    (5, 5, 5, True, DEGENERATE),           # S wins first
    (4, 4, 5, True, DEGENERATE),
])
def test_verdict_table(rank_gamma, rank_a, dim, degenerate, verdict):
    assert verdict_from_ranks(rank_gamma, rank_a, dim, degenerate) == verdict


def test_conditions():
    assert holds_cs(3, 3) and not holds_cs(2, 3)
    assert not holds_cn(2, 2, 3) and holds_cn(2, 3, 3) and holds_cn(3, 3, 3) and holds_cn(3, None, 3)


def test_cn_needs_rank_a_when_cs_fails():
    with pytest.raises(InvariantViolation, match="rank_a is needed to decide C_N when C_S fails"):
        holds_cn(2, None, 3)


def test_reasons_cite_the_theorems():
    assert "Theorem 9" in reason_from_ranks(3, 3, 3, IDENTIFIABLE)
    assert "Theorem 8" in reason_from_ranks(2, 2, 3, NOT_IDENTIFIABLE)
    assert "rank A = 3" in reason_from_ranks(2, 3, 3, INCONCLUSIVE)
    with pytest.raises(InvariantViolation, match="no off-boundary reason for verdict 'degenerate'"):
        reason_from_ranks(3, 3, 3, DEGENERATE)


def _write(tmp_path, name, obj):
    import json

    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(obj))
    return str(path)


def test_too_few_samples_is_said_first_in_table_json_and_explain(tmp_path, capsys):
    """Widths [1, 1, 1]: dim = N_0 N_1 + N_1 N_2 + N_2 = 3 (one of the two edges fixed, two biases).  On the
    samples 0, 1, Gamma has n N_L = 2 rows, so rank Gamma <= 2 < 3 whatever the two points: the reason
    opens with that, in the table, the JSON and explain.  A repeated point adds equal rows only: 0, 1, 1
    still has 2 distinct points.  With a third distinct point (n N_L = 3 = dim) the clause goes.
    A layer graph: f = c + v leaky_{1/10}(w x + b) has 4 parameters and one rescaling, dim_free = 3; on two
    samples rank Gamma_free <= 2 < 3 likewise."""
    import json

    from exactident.cli import main

    mlp = {"format": "exactident-case/1", "name": "few", "widths": [1, 1, 1], "weights": [[["2"]], [["3"]]],
           "biases": [["1"], ["0"]], "sample": [[0], [1]]}
    first = "2 distinct points x N_L = 2 < dim = 3: no sample of this size can prove identifiability"
    path = _write(tmp_path, "few", mlp)
    assert main(["check", "--no-numeric", path]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[3].startswith(f"few: {first}") and "at least 3 distinct points are needed" in lines[3]
    assert main(["check", "--no-numeric", "--json", path]) == 0
    assert json.loads(capsys.readouterr().out)["reason"].startswith(first)
    assert main(["explain", path]) == 0
    assert capsys.readouterr().out.splitlines()[1].strip().startswith(first)
    repeated = _write(tmp_path, "repeated", dict(mlp, sample=[[0], [1], [1]]))
    assert main(["check", "--no-numeric", "--json", repeated]) == 0
    assert json.loads(capsys.readouterr().out)["reason"].startswith(first)
    enough = _write(tmp_path, "enough", dict(mlp, sample=[[0], [1], [-1]]))
    assert main(["check", "--no-numeric", "--json", enough]) == 0
    assert "no sample of" not in json.loads(capsys.readouterr().out)["reason"]
    graph = {"format": "exactident-case/2", "name": "leaky", "input_shape": [1],
             "layers": [{"name": "fc1", "op": "linear", "inputs": ["input"], "weight": [["2"]], "bias": ["-1"]},
                        {"name": "act", "op": "leaky_relu", "inputs": ["fc1"], "negative_slope": "1/10"},
                        {"name": "fc2", "op": "linear", "inputs": ["act"], "weight": [["3"]], "bias": ["0"]}],
             "output": "fc2", "sample": [["0"], ["1"]]}
    assert main(["check", "--no-numeric", "--json", _write(tmp_path, "leaky", graph)]) == 0
    assert json.loads(capsys.readouterr().out)["reason"].startswith(
        "2 distinct points x N_L = 2 < dim_free = 3: no sample of this size can prove identifiability (rank "
        "Gamma_free <= 2;")
