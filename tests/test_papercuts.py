"""Issue 13, item 7: CLI and notebook papercuts.

``--version``; ``check DIR``; the resolution cap says ``2^k``; no ``DISAGREES``
against a verdict that was not reached; one-line ``repr`` of cases and reports;
``report.summary``.  Right values: the version from ``pyproject.toml``, file
orders from the folder listing, tie counts from the construction.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from exactident.check import check
from exactident.cli import main
from exactident.io.case import load_case, parse_case
from exactident.io.report import render_table

ROOT = Path(__file__).resolve().parents[1]


def _version_from_pyproject() -> str:
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    line = next(x for x in (ROOT / "pyproject.toml").read_text().splitlines() if x.startswith("version"))
    return line.split("=")[1].strip().strip('"')


def test_version(capsys):
    assert main(["--version"]) == 0
    out, err = capsys.readouterr()
    assert out == f"exactident {_version_from_pyproject()}\n" and err == ""


def _tiny(name, sample):
    return {"format": "exactident-case/1", "name": name, "widths": [1, 1, 1], "weights": [[["2"]], [["3"]]],
            "biases": [["1"], ["0"]], "sample": sample}


def test_check_takes_a_folder(tmp_path, capsys):
    for fname, name in (("b.json", "second"), ("a.json", "first")):
        (tmp_path / fname).write_text(json.dumps(_tiny(name, [["0"], ["1"], ["-1"]])))
    (tmp_path / "notes.txt").write_text("not a case")
    assert main(["check", "--json", str(tmp_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in data] == ["first", "second"]  # *.json in name order, other files ignored
    one = tmp_path / "one"
    one.mkdir()
    (one / "c.json").write_text(json.dumps(_tiny("only", [["0"]])))
    assert main(["check", "--json", str(one)]) == 0
    assert isinstance(json.loads(capsys.readouterr().out), list)  # a folder always gives an array
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["check", str(empty)]) == 2
    assert "holds no case files" in capsys.readouterr().err


def _many_ties(k: int):
    # [1, k, 1], neuron j = relu(x - (j + 1)) (kink at x = j + 1), samples on every kink: k visible ties
    # (no later hidden layer can hide them), 2^k resolutions.  Samples j + 1/2 (j = 0..k) and 0 put two
    # samples in each of the k + 1 linear pieces, so at the >= 0 pattern Gamma has full rank 2k + 1 = dim
    # (the columns x 1[x >= j+1], 1[x >= j+1] and 1 are independent on them): no kernel direction, so no
    # straight line past the cap either, and nothing decides the verdict.  (With every kink at 0, neurons
    # j and j' compute proportional functions and a line keeps f on all inputs: not identifiable.)
    xs = [str(j + 1) for j in range(k)] + [f"{2 * j + 1}/2" for j in range(k + 1)] + ["0"]
    return parse_case({"format": "exactident-case/1", "name": f"ties{k}", "widths": [1, k, 1],
                       "weights": [[["1"] for _ in range(k)], [[str((-1) ** j) for j in range(k)]]],
                       "biases": [[str(-(j + 1)) for j in range(k)], ["0"]], "sample": [[x] for x in xs]})


def test_resolution_cap_says_2_to_the_k_and_no_disagreement():
    r = check(_many_ties(39))
    assert r.verdict == "inconclusive" and r.n_ties == 39
    assert "2^39 tie resolutions" in r.reason and str(2**39) not in r.reason
    assert "--max-resolutions" not in r.reason  # 549755813888 resolutions cannot be enumerated
    assert r.numeric["agrees"] is None and r.numeric["compared_with"]["verdict"] is None
    table = render_table([r])
    assert "DISAGREES" not in table and "(exact not reached)" in table
    small = check(_many_ties(13), max_resolutions=4096)
    assert "2^13" in small.reason and "--max-resolutions 8192" in small.reason


def test_repr_is_one_short_line():
    case = load_case(ROOT / "cases" / "diabetes-mlp-10-8-1.json")
    text = repr(case)
    assert "\n" not in text and len(text) < 200
    assert "diabetes-mlp-10-8-1" in text and "[10, 8, 1]" in text and "n_samples=442" in text
    r = check(case, numeric=False)
    rt = repr(r)
    assert "\n" not in rt and len(rt) < 250 and "identifiable" in rt and "rank_gamma=89" in rt
    odd = parse_case(_tiny("a\nb\x1b[31m" + "x" * 500, [["0"]]))
    assert "\n" not in repr(odd) and "\x1b" not in repr(odd) and len(repr(odd)) < 200
    assert "\n" not in repr(check(odd)) and len(repr(check(odd))) < 300


def test_report_summary_lines():
    case = load_case(ROOT / "cases" / "tiny-111-kink.json")
    r = check(case)
    assert r.summary[0] == r.reason
    assert r.summary[1:1 + len(r.extra["summary"])] == r.extra["summary"]
    table = str(r)  # str() wraps reasons and notes at 100 characters; the CLI's table keeps one line each
    assert table == render_table([r], width=100)
    assert max(len(line) for line in table.splitlines()) <= 100
    flat = " ".join(table.split())
    for line in r.summary[1:]:
        assert " ".join(line.split()) in flat
    for line in r.summary[1:]:
        assert f"  {line}" in render_table([r])


@pytest.mark.parametrize("argv,code,printed", [(["check", "--version"], 2, False),
                                               (["--version", "check"], 0, True)])
def test_version_only_at_the_top(argv, code, printed, capsys):
    # `--version` is an option of the program, not of `check` (there: a usage error, exit 2)
    assert main(argv) == code
    out, err = capsys.readouterr()
    assert bool(out) == printed and (err.startswith("error:") if code == 2 else err == "")
