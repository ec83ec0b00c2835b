"""``exactident survey``: R_Gamma per trial against the sympy oracle, output, plot, budget."""

from __future__ import annotations

import json

import pytest
from _gen import forward, is_degenerate
from boundary_oracle import resolution_ranks

from exactident.cli import main
from exactident.suites.survey import draw_network, survey


def _quiet(total, desc):
    return None


@pytest.mark.parametrize("kind", ["gaussian", "rational"])
def test_ranks_match_the_oracle(kind):
    widths, n = [1, 2, 1], 4
    result = survey(widths, trials=6, n_samples=n, seed=3, kind=kind, progress=_quiet)
    compared = 0
    for t, rank in enumerate(result.ranks):
        d = draw_network(widths, n, 3, t, kind)
        ties = any(z == 0 for x in d.X for z in forward(d.W, d.b, x)[0])
        # the oracle takes z > 0 as active (survey: z >= 0) and fixes a nonzero edge: compare clean trials
        if not ties and not is_degenerate(d.W, d.b):
            assert rank == resolution_ranks(widths, d.W, d.b, d.X, {})[0]
            compared += 1
    assert compared >= 3
    assert result.dim == 5 and result.bound == 4


def test_gaussian_draws_are_exact_binary64_values():
    d = draw_network([2, 2, 1], 3, 0, 0, "gaussian")
    values = [v for Wl in d.W for r in Wl for v in r] + [v for x in d.X for v in x]
    assert all(v == type(v)(float(v)) and v.denominator & (v.denominator - 1) == 0 for v in values)


def test_same_arguments_same_ranks():
    a = survey([2, 2, 1], trials=4, seed=9, progress=_quiet).ranks
    assert a == survey([2, 2, 1], trials=4, seed=9, progress=_quiet).ranks


def test_cli_table_says_what_was_drawn(capsys):
    assert main(["survey", "--widths", "2,2,1", "--trials", "5", "--n-samples", "8", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "Gaussian float64 values" in out and "R_Gamma" in out and "reaching dim = 7:" in out
    assert main(["survey", "--widths", "2,2,1", "--trials", "3", "--rational", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["draws"] == "rational" and sum(data["distribution"].values()) == 3 == data["trials"]
    assert data["n_samples"] == 7  # smallest n with n * N_L >= dim = 2*2 + 2*1 + 1


def test_budget_stops_early(capsys):
    result = survey([3, 3, 3, 1], trials=10_000, budget=0.3, progress=_quiet)
    assert 0 < len(result.ranks) < 10_000 and "budget reached" in result.render()


def test_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "s.png"
    assert main(["survey", "--widths", "1,2,1", "--trials", "3", "--plot", str(path)]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["survey", "--widths", "1,2,1", "--trials", "3", "--plot", str(tmp_path / "s.xyz")]) == 2
    assert "unsupported image format" in capsys.readouterr().err
