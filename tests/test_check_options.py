"""``CheckOptions``: validation at construction, keywords vs options, the stage order of ``check``.

Truth: the domains are those docs/notebook.md ("Options") and the field comments state; two calls
asking for the same analysis (keywords, or one ``CheckOptions``) must give the same report (the
report minus its timing); the order of the stages is the pipeline's (forward pass, the ranks, the
verdict, the structural certificates, the float cross-check last: docs/theory.md), and a suite
``gap`` case has ranks in the gap by its family's promise, so its verdict needs the structural
stage.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
from pathlib import Path

import numpy as np
import pytest

import exactident
from exactident.check import CheckOptions, check
from exactident.errors import UnsupportedCaseError

ROOT = Path(__file__).resolve().parent.parent
TINY = str(ROOT / "cases" / "tiny-111-kink.json")  # on the boundary (one tie)
DIABETES = str(ROOT / "cases" / "diabetes-mlp-10-8-1-first10.json")  # tie-free, decided by the rank rules
LEAKY = str(ROOT / "cases" / "architectures" / "leaky-mlp.json")  # a layer graph: the constrained engine
GAP = str(ROOT / "cases" / "suite-v1" / "gap" / "gap-2x2x2-s1-002.json")  # R_Gamma in the gap


@pytest.mark.parametrize("field, value, message", [
    ("certify", "some", r"CheckOptions\.certify must be 'full' or 'none', not 'some'"),
    ("seed", "0", r"CheckOptions\.seed must be an integer or None, not '0'"),
    ("seed", True, r"CheckOptions\.seed must be an integer or None, not True"),
    ("max_resolutions", -1, r"CheckOptions\.max_resolutions must be an integer >= 0, not -1"),
    ("max_resolutions", 2.5, r"CheckOptions\.max_resolutions must be an integer >= 0, not 2\.5"),
    ("max_resolutions", None, r"CheckOptions\.max_resolutions must be an integer >= 0, not None"),
    ("tol", float("nan"), r"CheckOptions\.tol must be a finite number >= 0 or None, not nan"),
    ("tol", -1e-9, r"CheckOptions\.tol must be a finite number >= 0 or None"),
    ("rtol", math.inf, r"CheckOptions\.rtol must be a finite number >= 0 or None, not inf"),
    ("rtol", "1e-6", r"CheckOptions\.rtol must be a finite number >= 0 or None"),
    ("timeout", 0, r"CheckOptions\.timeout must be a number of seconds > 0 or None, not 0"),
    ("timeout", float("nan"), r"CheckOptions\.timeout must be a number of seconds > 0 or None"),
    ("numeric", "no", r"CheckOptions\.numeric must be True or False, not 'no'"),
    ("all_ranks", 2, r"CheckOptions\.all_ranks must be True or False, not 2"),
    ("structural", None, r"CheckOptions\.structural must be True or False, not None"),
    ("progress", "on", r"CheckOptions\.progress must be True, False or None, not 'on'"),
    ("fixed_choice", [((1, 0), 0)], r"CheckOptions\.fixed_choice must be a mapping"),
    ("on_stage", 3, r"CheckOptions\.on_stage must be a callable or None, not 3"),
    ("on_tick", "tick", r"CheckOptions\.on_tick must be a callable or None"),
    ("pipelines", [1], r"CheckOptions\.pipelines must be a comma-separated string or a collection of names"),
    ("pipelines", "kinks,flaot32", r"unknown float pipeline 'flaot32'"),
])
def test_a_value_outside_its_domain_is_refused_at_construction(field, value, message):
    with pytest.raises(UnsupportedCaseError, match=message):
        CheckOptions(**{field: value})
    with pytest.raises(UnsupportedCaseError, match=message):  # the keywords of check build the same options
        check(TINY, **{field: value})
    with pytest.raises(UnsupportedCaseError, match=message):  # and a keyword overriding options is validated
        check(TINY, CheckOptions(numeric=False), **{field: value})


def test_values_inside_the_domains_are_kept():
    opts = CheckOptions(timeout=math.inf, max_resolutions=0, seed=None, tol=0.0, rtol=0, numeric=np.bool_(False),  # type: ignore[arg-type]
                        fixed_choice={(1, 0): 0}, pipelines="all", progress=False)
    assert opts.timeout == math.inf and opts.max_resolutions == 0 and opts.seed is None
    assert CheckOptions() == CheckOptions(numeric=True, certify="full", seed=0, max_resolutions=4096)


def test_a_keyword_that_is_no_option_and_options_of_another_type_are_refused():
    with pytest.raises(UnsupportedCaseError, match=r"check\(\) has no option 'numerik'"):
        check(TINY, numerik=False)
    with pytest.raises(UnsupportedCaseError, match=r"check\(options=\.\.\.\) must be a CheckOptions, not dict"):
        check(TINY, {"numeric": False})  # type: ignore[arg-type]


def test_options_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        CheckOptions().seed = 3  # type: ignore[misc]


def _same(a, b):
    da, db = a.to_dict(), b.to_dict()
    da.pop("seconds", None), db.pop("seconds", None)
    return da == db


@pytest.mark.parametrize("path", [TINY, DIABETES, LEAKY, GAP])
@pytest.mark.parametrize("keywords", [
    {"numeric": False, "all_ranks": True},
    {"numeric": False, "certify": "none", "seed": 5},
    {"numeric": False, "structural": False, "max_resolutions": 1},
    {"tol": 1e-9},
])
def test_keywords_and_options_give_the_same_report(path, keywords):
    by_keywords = check(path, progress=False, **keywords)
    opts = CheckOptions(progress=False, **keywords)
    assert _same(check(path, opts), by_keywords)
    assert _same(check(path, options=opts), by_keywords)
    assert _same(exactident.check(path, exactident.CheckOptions(progress=False, **keywords)), by_keywords)


def test_a_keyword_beside_options_overrides_that_field():
    base = CheckOptions(numeric=False, all_ranks=False, progress=False)
    overridden = check(DIABETES, base, all_ranks=True)
    assert _same(overridden, check(DIABETES, numeric=False, all_ranks=True, progress=False))
    assert overridden.rank_a is not None  # all_ranks took effect: rank_a computed
    assert base.all_ranks is False  # the caller's options are not changed


# the stages check's own pipeline announces, in the pipeline's order (the rank and boundary stages in between)
PIPELINE = ("forward pass", "verdict", "structural certificates", "float cross-check")


def _stages(path: str, **keywords) -> list[str]:
    names: list[str] = []
    check(path, on_stage=lambda name, sizes: names.append(name), **keywords)
    return names


@pytest.mark.parametrize("path", [DIABETES, GAP, TINY])
def test_the_stages_come_in_the_pipeline_order(path):
    names = _stages(path)
    assert names[0] == "forward pass" and names[-1] == "float cross-check"
    ours = [n for n in names if n in PIPELINE]
    assert ours == sorted(ours, key=PIPELINE.index)  # each once, in order
    assert len(set(ours)) == len(ours)
    first_rank = names.index("ranks mod p")  # the certified ranks come after the forward pass, before the verdict
    assert 0 < first_rank < (names.index("verdict") if "verdict" in names else len(names) - 1)


def test_the_structural_stage_runs_for_a_gap_case_only_when_asked():
    assert "structural certificates" in _stages(GAP, numeric=False)
    assert "structural certificates" not in _stages(GAP, numeric=False, structural=False)
    assert "float cross-check" not in _stages(GAP, numeric=False)


def test_the_command_line_builds_the_options_once(monkeypatch):
    import exactident.run_cases as run_cases
    from exactident.cli import main

    seen = []

    def recording(case, options=None, **keywords):
        seen.append((options, keywords))
        return check(case, options, **keywords)

    monkeypatch.setattr(run_cases, "check", recording)
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["check", "--no-numeric", "--max-resolutions", "7", "--expect", TINY, DIABETES]) == 0
    assert len(seen) == 2 and seen[0][0] is seen[1][0]  # one CheckOptions for every case
    opts = seen[0][0]
    assert (opts.numeric, opts.max_resolutions, opts.all_ranks) == (False, 7, True)
    assert set(seen[0][1]) == {"timeout", "on_stage", "on_tick"}  # per case: the budget and the progress line
