"""Exact conversion of arrays (Case.from_arrays), samples from files, size limits, shape errors.

Right values: every float's exact value is decoded from its bits in the test
(``tests/_importers.py``, IEEE 754 with Fractions) or is ``Fraction(float(x))``;
decimal text is the decimal it spells.  No optional extra is needed here.
"""

from __future__ import annotations

import pickle
from fractions import Fraction

import flint
import numpy as np
import pytest
from _importers import FORMATS_BITS, assert_network_equals, decode, decode_array

from exactident import Case, CaseFormatError, check
from exactident.cli import main
from exactident.io.case import dump_case, load_case, parse_case, write_case
from exactident.io.importers import load_sample, parse_rows
from exactident.io.importers.arrays import bfloat16_bits_to_float32, dyadic

RNG = np.random.default_rng(20240610)


def _frac(q):
    return Fraction(int(q.p), int(q.q))


@pytest.mark.parametrize("fmt", ["float16", "float32", "float64"])
def test_from_arrays_every_weight_is_its_binary_value(fmt):
    W1 = (RNG.standard_normal((3, 2)) * 10.0 ** RNG.integers(-3, 3, (3, 2))).astype(fmt)
    W2 = RNG.standard_normal((1, 3)).astype(fmt)
    b1 = RNG.standard_normal(3).astype(fmt)
    X = RNG.standard_normal((4, 2)).astype(fmt)
    case = Case.from_arrays([W1, W2], [b1, None], X, name="r")
    view = FORMATS_BITS[fmt][2]
    assert_network_equals(case.network, [decode_array(W1.view(view), fmt), decode_array(W2.view(view), fmt)],
                          [decode_array(b1.view(view), fmt)[0], [Fraction(0)]])
    assert [[_frac(v) for v in row] for row in case.X] == decode_array(X.view(view), fmt)
    assert case.provenance["weight_dtype"] == fmt and case.provenance["sample_dtype"] == fmt


def test_subnormals_and_extremes_are_exact():
    x = np.array([[5e-324, -2.2250738585072014e-308, 1.7976931348623157e308]])
    case = Case.from_arrays([x], None, [[0, 0, 0]])
    assert [_frac(case.network.W[0][0, j]) for j in range(3)] == [Fraction(float(v)) for v in x[0]]
    assert _frac(case.network.W[0][0, 0]) == Fraction(1, 2**1074)
    h = np.array([[np.float16(6e-8), np.float16(65504)]], dtype=np.float16)
    case = Case.from_arrays([h], None, [[0, 0]])
    assert [_frac(case.network.W[0][0, j]) for j in range(2)] == [Fraction(1, 2**24), Fraction(65504)]


def test_bfloat16_from_bits():
    bits = RNG.integers(0, 2**16, 200, dtype=np.uint16)
    bits = bits[((bits >> 7) & 0xFF) != 0xFF]  # drop NaN/inf patterns
    values = bfloat16_bits_to_float32(bits)
    assert [Fraction(float(v)) for v in values] == [decode(int(b), "bfloat16") for b in bits]


def test_bfloat16_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    W = RNG.standard_normal((2, 3)).astype(ml_dtypes.bfloat16)
    case = Case.from_arrays([W], None, np.zeros((1, 3)))
    assert_network_equals(case.network, [decode_array(W.view(np.uint16), "bfloat16")], [[0, 0]])
    assert case.provenance["weight_dtype"] == "bfloat16"


def test_exact_inputs_stay_exact():
    case = Case.from_arrays([[["1/3", Fraction(2, 7)], [flint.fmpq(-5, 3), 4]]], [["1e-3", 0]], [[1, "0.1"]])
    assert_network_equals(case.network, [[[Fraction(1, 3), Fraction(2, 7)], [Fraction(-5, 3), Fraction(4)]]],
                          [[Fraction(1, 1000), Fraction(0)]])
    assert [_frac(v) for v in case.X[0]] == [1, Fraction(1, 10)]
    assert case.provenance["weight_dtype"] == "exact"


def test_python_floats_are_binary64_not_decimal():
    case = Case.from_arrays([[[0.1]]], None, [[0.1]])
    assert _frac(case.network.W[0][0, 0]) == Fraction(0.1) != Fraction(1, 10)


def test_dyadic_never_rounds():
    for x in RNG.standard_normal(50) * 1e10:
        assert Fraction(*float(x).as_integer_ratio()) == _frac(dyadic(float(x)))


@pytest.mark.parametrize(("bad", "where"), [(np.nan, r"W1\[1\]\[0\]"), (np.inf, r"W1\[1\]\[0\]")])
def test_nan_inf_name_tensor_and_index(bad, where):
    W = np.ones((2, 2), dtype=np.float32)
    W[1, 0] = bad
    with pytest.raises(CaseFormatError, match=rf"<arrays>: {where}: expected a finite number"):
        Case.from_arrays([W], None, [[0, 0]])
    with pytest.raises(CaseFormatError, match=r"X\[0\]\[1\]: expected a finite number"):
        Case.from_arrays([np.ones((2, 2))], None, [[0.0, float("nan")]])


def test_number_limits_name_the_index():
    with pytest.raises(CaseFormatError, match=r"W1\[0\]\[1\]: more than 4000 digits"):
        Case.from_arrays([[[1, 10**5000]]], None, [[0, 0]])
    with pytest.raises(CaseFormatError, match=r"b1\[0\]: exponent beyond"):
        Case.from_arrays([[[1]]], [["1e-5000"]], [[0]])
    with pytest.raises(CaseFormatError, match=r"W1\[0\]\[0\]: expected a number, found True"):
        Case.from_arrays([[[True]]], None, [[0]])
    with pytest.raises(CaseFormatError, match=r"W1: unsupported dtype complex128"):
        Case.from_arrays([np.ones((1, 1), dtype=complex)], None, [[0]])
    with pytest.raises(CaseFormatError, match=r"W1\[0\]\[0\]: expected a number, found dict"):
        Case.from_arrays([[[{}]]], None, [[0]])


def test_shape_errors_name_the_layer_and_spot_transposes():
    with pytest.raises(CaseFormatError, match=r"W2: shape \(3, 2\) does not follow W1 of shape \(3, 4\) "
                                              r"\(expected \(N_2, 3\)\); W2 looks transposed"):
        Case.from_arrays([np.ones((3, 4)), np.ones((3, 2))], None, [[0] * 4])
    with pytest.raises(CaseFormatError, match=r"W2: .* W1 looks transposed \(its transpose would give N_1 = 5\)"):
        Case.from_arrays([np.ones((4, 5)), np.ones((2, 5))], None, [[0] * 4])
    with pytest.raises(CaseFormatError, match=r"b1: expected a vector of length 3 .* W1 looks transposed"):
        Case.from_arrays([np.ones((3, 4))], [np.zeros(4)], [[0] * 4])
    with pytest.raises(CaseFormatError, match=r"W1: expected a matrix"):
        Case.from_arrays([np.ones(3)], None, [[0]])
    with pytest.raises(CaseFormatError, match=r"X: rows have 3 entries, the network takes N_0 = 4"):
        Case.from_arrays([np.ones((2, 4))], None, np.zeros((5, 3)))
    with pytest.raises(CaseFormatError, match=r"biases: expected 2 vectors"):
        Case.from_arrays([np.ones((2, 4)), np.ones((1, 2))], [None], [[0] * 4])
    with pytest.raises(CaseFormatError, match=r"W1\[0\]: ragged rows: not a rectangular array"):
        Case.from_arrays([[[1, 2], [3]]], None, [[0, 0]])
    with pytest.raises(CaseFormatError, match=r"weights: expected a list of L matrices"):
        Case.from_arrays(np.ones((2, 2)), None, [[0, 0]])


def test_from_arrays_checks_and_round_trips(tmp_path):
    # f(x) = 3 relu(2x + 1): samples 0, 1, -1 -> identifiable (docs/theory.md's hand-checked case)
    case = Case.from_arrays([np.array([[2.0]]), np.array([[3.0]])], [np.array([1.0]), np.array([0.0])],
                            np.array([[0.0], [1.0], [-1.0]]))
    assert check(case, numeric=False).verdict == "identifiable"
    path = tmp_path / "c.json"
    write_case(case, path)
    again = load_case(path)
    assert again.provenance == case.provenance
    assert dump_case(again) == path.read_text(encoding="utf-8")


def test_provenance_field_is_validated():
    base = {"format": "exactident-case/1", "name": "t", "widths": [1, 1], "weights": [[["1"]]], "biases": [["0"]],
            "sample": []}
    with pytest.raises(CaseFormatError, match=r"a.json: provenance: expected an object"):
        parse_case({**base, "provenance": []}, "a.json")
    with pytest.raises(CaseFormatError, match=r"a.json: provenance.colour: unknown field"):
        parse_case({**base, "provenance": {"colour": "red"}}, "a.json")
    with pytest.raises(CaseFormatError, match=r"a.json: provenance.sha256: expected a string, found number 3"):
        parse_case({**base, "provenance": {"sha256": 3}}, "a.json")
    assert parse_case({**base, "provenance": {"format": "onnx"}}).provenance == {"format": "onnx"}


# ----------------------------------------------------------------------------------------------- samples

def test_sample_npy_npz_csv(tmp_path):
    X = RNG.standard_normal((6, 2)).astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    np.savez(tmp_path / "x.npz", X=X, y=np.zeros(6))
    (tmp_path / "x.csv").write_text("a,b\n0.1,-2\n\n1e-3,7/2\n", encoding="utf-8")
    want = decode_array(X.view(np.uint32), "float32")
    for name in ("x.npy", "x.npz"):
        s = load_sample(tmp_path / name, 2)
        assert [[_frac(v) for v in row] for row in s.X] == want and s.dtype == "float32"
    s = load_sample(tmp_path / "x.csv", 2)
    assert [[_frac(v) for v in row] for row in s.X] == [[Fraction(1, 10), -2], [Fraction(1, 1000), Fraction(7, 2)]]
    assert s.dtype == "decimal"
    s = load_sample(tmp_path / "x.npy", 2, parse_rows("2:4"))
    assert [[_frac(v) for v in row] for row in s.X] == want[2:4] and s.provenance()["sample_rows"] == "2:4"


def test_sample_errors(tmp_path):
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(CaseFormatError, match=r"obj.npy: array holds Python objects \(a pickle\): refused"):
        load_sample(tmp_path / "obj.npy", 1)
    (tmp_path / "p.npy").write_bytes(pickle.dumps([1.0]))
    with pytest.raises(CaseFormatError, match=r"p.npy: file is a pickle: refused"):
        load_sample(tmp_path / "p.npy", 1)
    (tmp_path / "bad.npy").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(CaseFormatError, match=r"bad.npy: not a valid .npy array"):
        load_sample(tmp_path / "bad.npy", 1)
    X = np.ones((3, 2))
    X[2, 1] = np.nan
    np.save(tmp_path / "nan.npy", X)
    with pytest.raises(CaseFormatError, match=r"nan.npy: sample\[2\]\[1\]: expected a finite number"):
        load_sample(tmp_path / "nan.npy", 2)
    np.save(tmp_path / "w.npy", np.ones((3, 2)))
    with pytest.raises(CaseFormatError, match=r"w.npy: sample: rows have 2 entries, the network takes N_0 = 3"):
        load_sample(tmp_path / "w.npy", 3)
    np.savez(tmp_path / "two.npz", a=X, b=X)
    with pytest.raises(CaseFormatError, match=r"two.npz: cannot tell which array is the sample \(arrays: a, b"):
        load_sample(tmp_path / "two.npz", 2)
    (tmp_path / "r.csv").write_text("1,2\n3\n", encoding="utf-8")
    with pytest.raises(CaseFormatError, match=r"r.csv: row 2: has 1 values, the first row has 2"):
        load_sample(tmp_path / "r.csv", 2)
    (tmp_path / "h.csv").write_text("1,2\nx,3\n", encoding="utf-8")
    with pytest.raises(CaseFormatError, match=r"h.csv: line 2 column 1: expected a number"):
        load_sample(tmp_path / "h.csv", 2)
    (tmp_path / "s.txt2").write_text("1", encoding="utf-8")
    with pytest.raises(CaseFormatError, match=r"s.txt2: unknown sample format"):
        load_sample(tmp_path / "s.txt2", 1)
    with pytest.raises(CaseFormatError, match=r"--sample-rows: expected a:b"):
        parse_rows("-1:3")


def test_size_limit_refuses_before_allocating(tmp_path):
    np.save(tmp_path / "big.npy", np.zeros((100, 10)))
    with pytest.raises(CaseFormatError, match=r"big.npy: file is 8128 bytes, larger than the limit 1000 bytes"):
        load_sample(tmp_path / "big.npy", 10, max_bytes=1000)
    # a compressed member whose *declared* size is over the limit, the file itself small: the archive's
    # declared total (the sum over its members) is refused before anything is decompressed
    np.savez_compressed(tmp_path / "bomb.npz", X=np.zeros((1000, 1000)))
    assert (tmp_path / "bomb.npz").stat().st_size < 100_000
    with pytest.raises(CaseFormatError, match=r"bomb.npz: archive expands to 7.6 MiB, more than the limit 1.0 MiB"):
        load_sample(tmp_path / "bomb.npz", 1000, max_bytes=2**20)


def test_cli_npz_model_with_samples(tmp_path, capsys):
    # f(x) = 3 relu(2x + 1): samples -1, 0, 1 identifiable; 0, 1, 2 not (docs/theory.md)
    np.savez(tmp_path / "m.npz", W1=np.array([[2.0]]), b1=np.array([1.0]), W2=np.array([[3.0]]), b2=np.zeros(1))
    np.save(tmp_path / "x.npy", np.array([[-1.0], [0.0], [1.0], [2.0]]))
    assert main(["check", str(tmp_path / "m.npz"), "--sample", str(tmp_path / "x.npy"),
                 "--sample-rows", "0:3", "--json", "--assume-relu-mlp"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "identifiable" and out["provenance"]["sample_rows"] == "0:3"
    assert out["provenance"]["format"] == "npz" and out["provenance"]["weight_dtype"] == "float64"
    assert main(["check", str(tmp_path / "m.npz"), "--sample", str(tmp_path / "x.npy"), "--sample-rows", "1:",
                 "--json", "--no-numeric", "--assume-relu-mlp"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "not-identifiable"
    assert main(["check", str(tmp_path / "m.npz")]) == 2
    assert "m.npz: --sample: a model file needs a sample" in capsys.readouterr().err
    assert main(["check", str(tmp_path / "m.npz"), "--sample", str(tmp_path / "x.npy"), "--max-bytes", "100"]) == 2
    err = capsys.readouterr().err
    assert "larger than the limit 100 bytes" in err and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------------------- more validators, each raise

@pytest.mark.parametrize(("module", "path", "message"), [
    ("onnx", "m.onnx", r"reading ONNX files needs onnx"),
    ("torch", "m.pt", r"reading PyTorch files needs torch"),
    ("safetensors", "m.safetensors", r"reading safetensors needs the safetensors package"),
    ("h5py", "m.keras", r"reading Keras files needs h5py"),
])
def test_missing_extra_is_a_one_line_error(tmp_path, monkeypatch, capsys, module, path, message):
    from exactident import UnsupportedCaseError, import_model

    (tmp_path / path).write_bytes(b"\x00" * 16)
    monkeypatch.setitem(__import__("sys").modules, module, None)  # `import module` now fails
    with pytest.raises(UnsupportedCaseError, match=message):
        import_model(tmp_path / path)
    assert main(["import", str(tmp_path / path)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_other_array_validators(tmp_path):
    with pytest.raises(CaseFormatError, match=r"W1: expected numbers, found a boolean array"):
        Case.from_arrays([np.ones((1, 1), dtype=bool)], None, [[0]])
    with pytest.raises(CaseFormatError, match=r"W1\[0\]\[0\]: unsupported float type longdouble"):
        Case.from_arrays([[[np.longdouble(1)]]], None, [[0]])
    with pytest.raises(CaseFormatError, match=r"W1: empty matrix of shape \(0, 2\)"):
        Case.from_arrays([np.ones((0, 2))], None, [[0, 0]])
    with pytest.raises(CaseFormatError, match=r"X: expected a matrix \(n, N_0\) = \(n, 2\), found shape \(1, 1, 2\)"):
        Case.from_arrays([np.ones((1, 2))], None, np.zeros((1, 1, 2)))
    assert Case.from_arrays([np.ones((1, 2))], None, np.zeros((0, 2))).X == []
    assert Case.from_arrays([np.ones((1, 2))], None, np.array([3.0, 4.0])).n_samples == 1


def test_load_and_detect_validators(tmp_path, capsys):
    from exactident.io.importers import as_case, import_model
    from exactident.io.importers.command import parse_bytes

    case = Case.from_arrays([np.ones((1, 1))], None, [[0]])
    with pytest.raises(CaseFormatError, match=r"sample: a Case already holds its sample"):
        as_case(case, [[1]])
    with pytest.raises(CaseFormatError, match=r"<check>: case: expected a Case or a path, found int"):
        check(3)
    write_case(case, tmp_path / "c.json")
    with pytest.raises(CaseFormatError, match=r"c.json: --sample: a case file already holds its sample"):
        check(str(tmp_path / "c.json"), sample=[[1]])
    assert check(str(tmp_path / "c.json"), numeric=False).n_samples == 1
    (tmp_path / "d.npz").mkdir()
    with pytest.raises(CaseFormatError, match=r"d.npz: cannot read file \(Is a directory\)"):
        import_model(tmp_path / "d.npz")
    (tmp_path / "x.csv").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(CaseFormatError, match=r"x.csv: cannot read as CSV text"):
        load_sample(tmp_path / "x.csv", 1)
    np.savez(tmp_path / "m.npz", W1=np.ones((1, 1)))
    with pytest.raises(CaseFormatError, match=r"m.npz: --format: unknown format 'tflite'"):
        import_model(tmp_path / "m.npz", fmt="tflite")
    with pytest.raises(__import__("argparse").ArgumentTypeError, match=r"expected a size like 64M"):
        parse_bytes("lots")
    assert main(["import", str(tmp_path / "m.npz"), "--max-bytes", "lots"]) == 2
    capsys.readouterr()
    assert main(["import", str(tmp_path / "m.npz"), "--assume-relu-mlp"]) == 0
    assert '"format": "exactident-case/1"' in capsys.readouterr().out


def test_parse_case_points_to_from_arrays():
    base = {"format": "exactident-case/1", "name": "t", "widths": [1, 1], "biases": [["0"]], "sample": []}
    with pytest.raises(CaseFormatError, match=r"weights\[0\]\[0\]\[0\]: expected a number, found Fraction .*"
                                              r"\(Case.from_arrays takes Fraction"):
        parse_case({**base, "weights": [[[Fraction(1, 3)]]]})
    with pytest.raises(CaseFormatError, match=r"float 0.5 is not exact; .* Case.from_arrays"):
        parse_case({**base, "weights": [[[0.5]]]})
