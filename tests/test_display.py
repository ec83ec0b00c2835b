"""Rich display (docs/notebook.md): HTML views, short reprs, wrapped reasons, the parameter table, progress.

Right values: the tiny case ``f = 3 relu(2x + 1)`` sampled at ``0, 1, -1/2`` (paper §2, derived in
docs/theory.md): ``rank Gamma = rank A = 2 < dim = 3``, not identifiable, the biases trade along
``b_1 - 3 b_2``; the names ``W_l[i,j]`` / ``b_l[i]`` of a ``[2, 3, 1]`` network are listed by hand;
the structural case ``one-active-sample`` (tests/structural_cases.py: a hidden neuron active at one
sample of a 1-D input, an unpinned hyperplane, derived there) is inconclusive by the rank rules.
"""

from __future__ import annotations

import html.parser
import sys
from pathlib import Path

import pytest

import exactident
from exactident import parse_case
from exactident.errors import UnsupportedCaseError
from exactident.io.display import framework_name, parameter_rows, wrap

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "cases" / "tiny-111-kink.json"
VOID = {"br", "hr", "img", "meta", "link", "input"}


class _Checker(html.parser.HTMLParser):
    """Tags balance (every opened tag closed in order) and the text, unescaped."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.text: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def parsed(markup: str) -> str:
    p = _Checker()
    p.feed(markup)
    p.close()
    assert p.errors == [] and p.stack == [], (p.errors, p.stack)
    return " ".join(" ".join(p.text).split())


def _tiny_case(names=None):
    obj = {"format": "exactident-case/1", "name": "t <b>", "widths": [1, 1, 1], "weights": [[["2"]], [["3"]]],
           "biases": [["1"], ["0"]], "sample": [[0], [1], ["-1/2"]]}
    if names:
        obj["provenance"] = {"parameter_names": names}
    return parse_case(obj)


def test_report_html_is_valid_and_says_verdict_ranks_reason():
    r = exactident.check(_tiny_case(), numeric=False, progress=False)
    text = parsed(r._repr_html_())
    assert "not-identifiable" in text and "boundary-entering" in text
    assert "rank Gamma 2" in text and "rank A 2" in text and "dim 3" in text
    assert " ".join(r.reason.split()) in text
    assert "Report t <b>" in text and "<b>t <b>" not in r._repr_html_()  # the name is escaped, not markup


def test_repr_is_short_and_has_decided_by():
    r = exactident.check(TINY, numeric=False, progress=False)
    text = repr(r)
    assert "\n" not in text and "verdict='not-identifiable'" in text and "decided_by='boundary-entering'" in text
    assert "rank_gamma=2" in text and "rank_a=2" in text


def test_str_wraps_long_reasons():
    r = exactident.check(TINY, numeric=False, progress=False)
    r.reason = "word " * 100
    lines = str(r).splitlines()
    assert max(len(line) for line in lines) <= 100
    assert len(max(exactident.io.report.render_table([r]).splitlines(), key=len)) > 400  # the CLI's: one line


def test_wrap_keeps_hyphenated_verdicts_whole():
    lines = wrap("x " * 40 + "not-identifiable", width=81)
    assert any("not-identifiable" in line for line in lines)


def test_case_explain_design_crosscheck_html():
    case = exactident.load_case(TINY)
    assert "[1, 1, 1]" in parsed(case._repr_html_())
    ex = exactident.explain(case, progress=False)
    text = parsed(ex._repr_html_())
    assert "not-identifiable" in text and "b_1[0]" in text and "first-order-determined" in text
    assert "not-identifiable" in repr(ex) and "\n" not in repr(ex)
    d = exactident.design(case, progress=False)
    assert "rank Gamma 2" in parsed(d._repr_html_()) and "lower_bound=3" in repr(d)
    c = exactident.crosscheck(case, progress=False)
    text = parsed(c._repr_html_())
    assert "rank rules: not-identifiable" in text and "float64/numpy-default" in text
    assert "rank_rules='not-identifiable'" in repr(c)


def test_explain_classes_reach_the_report_table():
    # b_1[0] and b_2[0] trade along b_1 - 3 b_2 (not identifiable); W_1[0,0] is pinned to first order;
    # W_2[0,0] is the fixed edge of the single hidden neuron.
    ex = exactident.explain(_tiny_case({"W_1": "fc1.weight[i,j]", "b_1": "fc1.bias[i]"}), progress=False)
    rows = {row["parameter"]: row for row in ex.report.parameters_rows()}
    assert {k: v["class"] for k, v in rows.items()} == {
        "W_1[0,0]": "first-order-determined", "b_1[0]": "not-identifiable", "b_2[0]": "not-identifiable",
        "W_2[0,0]": "fixed"}
    assert rows["W_1[0,0]"]["framework_name"] == "fc1.weight[0,0]" and rows["b_2[0]"]["framework_name"] is None


def test_parameter_rows_without_explain_list_every_parameter():
    # [2, 3, 1]: W_1 is 3x2 (6), b_1 3, W_2 1x3 (3), b_2 1: 13 parameters; sklearn stores kernels [j,i]
    rows = parameter_rows([2, 3, 1], {"parameter_names": {"W_1": "coefs_[0][j,i]", "b_2": "intercepts_[1][i]"}})
    assert [r["parameter"] for r in rows] == [
        "W_1[0,0]", "W_1[0,1]", "W_1[1,0]", "W_1[1,1]", "W_1[2,0]", "W_1[2,1]", "b_1[0]", "b_1[1]", "b_1[2]",
        "W_2[0,0]", "W_2[0,1]", "W_2[0,2]", "b_2[0]"]
    assert rows[5]["framework_name"] == "coefs_[0][1,2]" and rows[12]["framework_name"] == "intercepts_[1][0]"
    assert rows[6]["framework_name"] is None and "class" not in rows[0]
    assert framework_name("W_3[1,2]", {"W_3": "dense/kernel"}) == "dense/kernel"  # no index order: as given


def test_parameters_frame_with_pandas():
    pd = pytest.importorskip("pandas")
    ex = exactident.explain(_tiny_case({"W_1": "fc1.weight[i,j]"}), progress=False)
    frame = ex.report.parameters_frame()
    assert isinstance(frame, pd.DataFrame) and len(frame) == 4
    # the network's order (W_1, b_1, W_2, b_2), as the unexplained table lists it
    assert list(frame["parameter"]) == ["W_1[0,0]", "b_1[0]", "W_2[0,0]", "b_2[0]"]
    assert frame.loc[frame["parameter"] == "W_1[0,0]", "framework_name"].item() == "fc1.weight[0,0]"


def test_explained_rows_follow_the_network_order():
    # Regression: after explain the rows came in the report field's order (fixed edges first), so the
    # explained and unexplained tables of one network did not line up. [1, 2, 1] by hand: W_1 (2x1),
    # b_1 (2), W_2 (1x2), b_2 (1); each hidden neuron's single outgoing edge W_2[0,i] is its fixed edge.
    obj = {"format": "exactident-case/1", "name": "t", "widths": [1, 2, 1], "weights": [[["1"], ["-1"]], [["2", "3"]]],
           "biases": [["0", "1"], ["0"]], "sample": [["-2"], ["-1"], ["1"], ["2"], ["3"]]}
    case = parse_case(obj)
    order = ["W_1[0,0]", "W_1[1,0]", "b_1[0]", "b_1[1]", "W_2[0,0]", "W_2[0,1]", "b_2[0]"]
    plain = exactident.check(case, numeric=False, progress=False).parameters_rows()
    ex = exactident.explain(case, progress=False)
    explained = ex.report.parameters_rows()
    assert [r["parameter"] for r in plain] == order == [r["parameter"] for r in explained]
    assert [r["class"] for r in explained if r["parameter"].startswith("W_2")] == ["fixed", "fixed"]


def test_layer_graph_rows_are_its_parameters_not_a_chain_of_widths():
    # Regression: check(layer graph).parameters_rows() listed W_l/b_l of a chain of its widths
    # (parameters the network does not have), and after explain put the case's names in `parameter`.
    # leaky-mlp 2-3-1 has fc1.weight (3x2), fc1.bias (3), fc2.weight (1x3), fc2.bias (1): 13 parameters.
    path = ROOT / "cases" / "architectures" / "leaky-mlp.json"
    with pytest.raises(UnsupportedCaseError, match="explain"):
        exactident.check(path, numeric=False, progress=False).parameters_rows()
    ex = exactident.explain(path, progress=False)
    rows = ex.report.parameters_rows()
    assert [r["parameter"] for r in rows] == [f"theta_{j}" for j in range(13)]
    assert rows[0]["framework_name"] == "fc1.weight[0,0]" and rows[12]["framework_name"] == "fc2.bias[0]"
    assert rows[8]["framework_name"] == "fc1.bias[2]" and all(r["class"] for r in rows)
    pd = pytest.importorskip("pandas")
    frame = ex.parameters_frame()  # the same columns as a plain MLP's explanation
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns)[:7] == ["parameter", "framework_name", "layer", "kind", "class", "by", "why"]
    assert list(frame.columns)[7:] == ["witness", "line"]  # the layer graph's explanation says more
    assert list(frame["framework_name"]) == [r["framework_name"] for r in rows]


def test_parameters_frame_without_pandas_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    r = exactident.check(TINY, numeric=False, progress=False)
    with pytest.raises(UnsupportedCaseError, match="pandas"):
        r.parameters_frame()


@pytest.mark.parametrize("call", ["check", "explain", "design", "crosscheck"])
def test_progress_true_shows_stages_false_is_silent(call, capsys):
    fn = getattr(exactident, call)
    kwargs = {"numeric": False} if call == "check" else {}
    fn(TINY, progress=False, **kwargs)
    assert capsys.readouterr().err == ""
    fn(TINY, progress=True, **kwargs)
    err = capsys.readouterr().err
    assert "forward pass" in err and "tiny-111-kink" in err  # the terminal's stage names


def test_progress_auto_is_off_outside_a_terminal_or_kernel(capsys):
    exactident.check(TINY, numeric=False)  # pytest captures stderr: not a terminal
    assert capsys.readouterr().err == ""


def test_crosscheck_states_both_verdicts():
    sys.path.insert(0, str(Path(__file__).parent))
    from structural_cases import ONE_ACTIVE

    case = parse_case(ONE_ACTIVE)
    c = exactident.crosscheck(case, progress=False)
    rank_rules = exactident.check(case, numeric=False, structural=False, progress=False)
    final = exactident.check(case, numeric=False, progress=False)
    assert rank_rules.verdict == "inconclusive" and final.verdict == "not-identifiable"
    assert c.comparison == ("rank rules: inconclusive; check's verdict: not-identifiable "
                            "(decided by unpinned-hyperplane)")
    assert c.to_dict()["check"] == {"verdict": "not-identifiable", "decided_by": "unpinned-hyperplane"}
    from exactident.crosscheck.core import summarize
    from exactident.crosscheck.render import render_text

    assert c.comparison in render_text([c], summarize([c]))


def test_library_crosscheck_of_a_layer_graph_case():
    # Regression: exactident.crosscheck(case) on an exactident-case/2 case raised
    # UnsupportedCaseError (its progress stage read case.network, the plain MLP only), while
    # `exactident crosscheck` on the same file worked.  leaky-mlp is 2-3-1 with a leaky ReLU:
    # 13 parameters, 3 positive rescalings (leaky ReLU is positively homogeneous), so
    # dim_free = 10, and 9 samples x 1 output give rank Gamma_free <= 9 < 10: never identifiable.
    c = exactident.crosscheck(ROOT / "cases" / "architectures" / "leaky-mlp.json", progress=True)
    assert c.verdict == "not-identifiable" and c.check_verdict == "not-identifiable"
    assert c.rank_gamma <= 9 and c.dim == 10


def test_case_repr_of_a_layer_graph_names_its_parameter_count():
    # Regression: a layer-graph case's repr said dim=13 (its parameter count) where its report says
    # dim = 10 (dim_free): leaky-mlp 2-3-1 has 2*3 + 3 + 3 + 1 = 13 parameters and 3 rescalings.
    # The repr now names the count `params`; a plain MLP keeps the paper's dim.
    case = exactident.load_case(ROOT / "cases" / "architectures" / "leaky-mlp.json")
    assert "params=13" in repr(case) and "dim=" not in repr(case)
    assert "params 13" in parsed(case._repr_html_())
    tiny = exactident.load_case(TINY)  # 1-1-1: 4 parameters - 1 rescaling
    assert "dim=3" in repr(tiny)


def test_progress_redraws_a_long_stage_now_and_then(capsys, monkeypatch):
    # Regression: the display was redrawn only when the stage changed, so design's "new points"
    # (one stage, minutes long: 4 min 47 s on an 8-16-16-1 MLP) stayed on "point 1" in a notebook
    # while 158 more points were added.  Within a stage it is now redrawn every REDRAW_SECONDS at
    # most: a clock moved by hand shows which updates are drawn.
    pytest.importorskip("tqdm")
    import exactident.progress as progress

    clock = [1000.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    with progress.showing(True, "design t") as show:
        show("new points", {"last": "point 1"})  # a new stage: drawn
        clock[0] += 1
        show("new points", {"last": "point 2"})  # 1 s later, same stage: not drawn
        clock[0] += progress.REDRAW_SECONDS
        show("new points", {"last": "point 3"})  # past REDRAW_SECONDS: drawn
        clock[0] += 1
        show("new points", {"last": "point 4"})  # not drawn (the closing line shows "done")
    err = capsys.readouterr().err
    assert "point 1" in err and "point 3" in err
    assert "point 2" not in err and "point 4" not in err
