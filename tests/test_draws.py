"""The finders' seeded draws (exactident.linalg.draws): ranges, exact uniformity by rejection, no numpy.random."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from exactident.linalg.draws import Draws

CASES = Path(__file__).resolve().parent.parent / "cases"


@pytest.mark.parametrize("low,high", [(0, 1), (0, 2), (0, 3), (-5, 6), (1, 1048583), (-(2**20), 2**20 + 1),
                                      (-(2**63), 2**63), (2**62, 2**63)])
def test_integers_stay_in_range_and_repeat_with_the_seed(low, high):
    a = Draws(11).integers(low, high, (40, 25))
    assert a.dtype == np.int64 and a.shape == (40, 25)
    assert all(low <= int(v) < high for v in a.ravel())
    assert (Draws(11).integers(low, high, (40, 25)) == a).all()
    assert not (high - low > 2**10 and (Draws(12).integers(low, high, (40, 25)) == a).all())


def test_a_power_of_two_span_keeps_the_low_bits_of_each_word():
    words = Draws(3).words(1000)
    assert (Draws(3).below(2**20, 1000) == words % np.uint64(2**20)).all()
    assert (Draws(3).below(2**64, 1000) == words).all()


def test_words_of_the_incomplete_top_range_are_drawn_again(monkeypatch):
    # span 3: 2**64 = 3 q + 1, so the one word 2**64 - 1 would give residue 0 one time too many
    stream = [np.array([2**64 - 1, 5, 2**64 - 1], dtype=np.uint64), np.array([2**64 - 1, 7], dtype=np.uint64),
              np.array([4], dtype=np.uint64)]
    d = Draws(0)
    monkeypatch.setattr(d, "words", lambda count: stream.pop(0)[:count])
    assert d.below(3, 3).tolist() == [4 % 3, 5 % 3, 7 % 3]
    assert not stream


def test_small_spans_are_uniform():
    # 60,000 draws in [0, 6): each count within 6 standard deviations (sqrt(n p (1 - p)) ~ 91) of 10,000
    counts = np.bincount(Draws(5).integers(0, 6, 60000), minlength=6)
    assert counts.sum() == 60000 and (abs(counts - 10000) < 6 * 91).all()


def test_numpy_integer_bounds_are_read_as_python_ints():
    a = Draws(1).integers(np.int64(-5), np.int64(6), 300)
    assert (a == Draws(1).integers(-5, 6, 300)).all() and int(a.min()) >= -5 and int(a.max()) <= 5


def test_scalar_draws_and_permutations():
    d = Draws(9)
    v = d.integers(10)
    assert isinstance(v, int) and 0 <= v < 10
    p = Draws(9).permutation(1000)
    assert sorted(p.tolist()) == list(range(1000)) and p.tolist() != list(range(1000))
    x = Draws(9).normal(2.0, 3.0, 20000)
    assert abs(float(x.mean()) - 2.0) < 0.15 and abs(float(x.std()) - 3.0) < 0.15
    assert isinstance(Draws(9).normal(), float)


def test_large_draws_come_from_numpy_and_repeat_with_the_seed():
    from exactident.linalg.draws import NUMPY_FROM

    p = 1048583
    a = Draws(4).integers(-(p // 2), p // 2 + 1, (4, NUMPY_FROM // 4))
    assert a.dtype == np.int64 and int(a.min()) >= -(p // 2) and int(a.max()) <= p // 2
    assert (Draws(4).integers(-(p // 2), p // 2 + 1, (4, NUMPY_FROM // 4)) == a).all()
    # uniform: each of 8 equal slices of the range holds about an eighth of 262,144 draws (sd ~ 169)
    counts = np.bincount((a.ravel() + p // 2) * 8 // p, minlength=8)
    assert (abs(counts - a.size / 8) < 6 * 169).all()
    perm = Draws(4).permutation(NUMPY_FROM)
    assert (np.sort(perm) == np.arange(NUMPY_FROM)).all() and (Draws(4).permutation(NUMPY_FROM) == perm).all()


@pytest.mark.parametrize("low,high", [(3, 3), (5, 2), (0, 2**64)])
def test_an_empty_or_too_wide_range_is_refused(low, high):
    with pytest.raises(ValueError):
        Draws(0).integers(low, high, 3)


@pytest.mark.parametrize("name", ["iris-mlp-4-8-8-3.json", "diabetes-mlp-10-8-1.json"])
def test_check_does_not_import_numpy_random(name):
    """numpy.random loads OpenSSL through secrets/hashlib (6.5 MB resident): ``check`` draws without it (iris:
    the rank interval's kernel searches and sketches; diabetes: full rank, the float cross-check)."""
    code = ("import sys\n"
            "from exactident import check\n"
            f"r = check({str(CASES / name)!r})\n"
            "print(r.verdict, sorted(m for m in ('numpy.random', 'secrets', 'hashlib') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split(" ", 1)[1].strip() == "[]", out
