"""ONNX import: graphs built here with onnx.helper, weights in float16/bfloat16/float32/float64.

Right values: each weight's exact value is decoded from its bits in the test
(``tests/_importers.py``); the framework output is ``onnx.reference.ReferenceEvaluator``;
the imported network's float64 forward pass must match it within the forward
rounding-error bound of the weights' dtype.  Skipped without the ``onnx`` extra.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction

import numpy as np
import pytest
from _importers import FORMATS_BITS, UNIT_ROUNDOFF, assert_network_equals, decode_array, float_forward
from _importers import bad_input_error as _err

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from exactident import CaseFormatError, check, import_model  # noqa: E402
from exactident.cli import main  # noqa: E402

RNG = np.random.default_rng(7)
ELEM = {"float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16, "float32": TensorProto.FLOAT,
        "float64": TensorProto.DOUBLE}


def _bits(arr, fmt):
    """Bit patterns of ``arr`` in ``fmt`` (bfloat16: the top half of float32, rounded to nearest even)."""
    if fmt == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        return np.asarray(arr).astype(ml_dtypes.bfloat16).view(np.uint16)
    return np.asarray(arr, dtype=fmt).view(FORMATS_BITS[fmt][2])


def _init(name, arr, fmt):
    if fmt == "bfloat16":
        bits = _bits(arr, fmt)
        t = helper.make_tensor(name, TensorProto.BFLOAT16, arr.shape, bits.tobytes(), raw=True)
        return t
    return numpy_helper.from_array(np.asarray(arr, dtype=fmt), name)


def _model(nodes, inits, fmt, n_in, n_out, inputs=None):
    elem = ELEM[fmt]
    graph = helper.make_graph(nodes, "g", inputs or [helper.make_tensor_value_info("x", elem, ["n", n_in])],
                              [helper.make_tensor_value_info("y", elem, ["n", n_out])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _mlp(fmt, widths=(3, 5, 4, 2), final=None, style="gemm"):
    """A ReLU MLP; returns (model, W (N_l, N_{l-1}) float64 arrays as stored, b) in the stored orientation."""
    nodes, inits, W, b = [], [], [], []
    cur = "x"
    L = len(widths) - 1
    for l in range(1, L + 1):
        Wl = RNG.standard_normal((widths[l], widths[l - 1]))
        bl = RNG.standard_normal(widths[l])
        W.append(Wl)
        b.append(bl)
        out = f"z{l}"
        if style == "gemm":  # PyTorch's exporter: Gemm(x, W, b, transB=1)
            inits += [_init(f"W{l}", Wl, fmt), _init(f"b{l}", bl, fmt)]
            nodes.append(helper.make_node("Gemm", [cur, f"W{l}", f"b{l}"], [out], name=f"gemm{l}", transB=1))
        else:  # MatMul(x, W^T) + Add(b), the Keras/TF exporters' form
            inits += [_init(f"W{l}", Wl.T.copy(), fmt), _init(f"b{l}", bl, fmt)]
            nodes.append(helper.make_node("MatMul", [cur, f"W{l}"], [f"m{l}"], name=f"matmul{l}"))
            nodes.append(helper.make_node("Add", [f"m{l}", f"b{l}"], [out], name=f"add{l}"))
        cur = out
        if l < L:
            nodes.append(helper.make_node("Relu", [cur], [f"h{l}"], name=f"relu{l}"))
            cur = f"h{l}"
    if final == "Softmax":
        nodes.append(helper.make_node("Softmax", [cur], ["y"], name="softmax", axis=1))
    elif final == "Sigmoid":
        nodes.append(helper.make_node("Sigmoid", [cur], ["y"], name="sigmoid"))
    else:
        nodes.append(helper.make_node("Identity", [cur], ["y"], name="out"))
    return _model(nodes, inits, fmt, widths[0], widths[-1]), W, b


@pytest.mark.parametrize("fmt", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("style", ["gemm", "matmul"])
def test_weights_exact_and_forward_matches_reference(tmp_path, fmt, style):
    model, W, b = _mlp(fmt, style=style, final="Softmax" if style == "gemm" else None)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    X = RNG.standard_normal((7, 3))
    np.save(tmp_path / "x.npy", X)
    case = import_model(path, tmp_path / "x.npy")
    # every weight is the exact value of the stored bits
    assert_network_equals(case.network, [decode_array(_bits(w, fmt), fmt) for w in W],
                          [decode_array(_bits(v, fmt), fmt)[0] for v in b])
    assert case.provenance["weight_dtype"] == fmt and case.provenance["format"] == "onnx"
    assert case.provenance.get("dropped_output_activation") == ("softmax" if style == "gemm" else None)
    assert "within the rounding bound" in case.provenance["crosscheck"]
    # the initializers' names, with the index order as stored: MatMul holds W_l transposed
    order = "[i,j]" if style == "gemm" else "[j,i]"
    assert case.provenance["parameter_names"] == {key: f"{key[0]}{key[2]}{order if key[0] == 'W' else '[i]'}"
                                                  for key in ("W_1", "b_1", "W_2", "b_2", "W_3", "b_3")}
    # the imported network's forward pass = the reference evaluator's (pre-softmax) output within rounding
    in_dtype = onnx.helper.tensor_dtype_to_np_dtype(ELEM[fmt])
    Xin = X.astype(in_dtype)
    ours, bound = float_forward(case.network, Xin.astype(np.float64), UNIT_ROUNDOFF[fmt])
    res = ReferenceEvaluator(model).run(None, {"x": Xin}, intermediate=True)
    ref = np.asarray(res["z3"]).astype(np.float64)
    assert np.all(np.abs(ours - ref) <= bound)


def test_gemm_attributes_alpha_beta_trans(tmp_path):
    # Y = alpha * A' B' + beta * C with the data as B (feature-major), transA on the weight: W_1 = alpha A^T
    A = RNG.standard_normal((3, 4)).astype(np.float32)  # stored (N_0, N_1), used transposed
    C = RNG.standard_normal((4, 1)).astype(np.float32)
    W2 = RNG.standard_normal((2, 4)).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["A", "x", "C"], ["z1"], name="g1", transA=1, transB=1, alpha=0.5, beta=2.0),
             helper.make_node("Relu", ["z1"], ["h1"], name="r1"),
             helper.make_node("Gemm", ["h1", "W2"], ["y"], name="g2", transA=1, transB=1)]
    model = _model(nodes, [numpy_helper.from_array(v, k) for k, v in (("A", A), ("C", C), ("W2", W2))],
                   "float32", 3, 2)
    onnx.save(model, tmp_path / "g.onnx")
    X = RNG.standard_normal((6, 3))
    case = import_model(tmp_path / "g.onnx", X)
    half, two = Fraction(1, 2), Fraction(2)
    W1 = [[half * v for v in row] for row in decode_array(A.T.copy().view(np.uint32), "float32")]
    assert_network_equals(case.network, [W1, decode_array(W2.view(np.uint32), "float32")],
                          [[two * v for v in decode_array(C.ravel().view(np.uint32), "float32")[0]], [0, 0]])
    ours, bound = float_forward(case.network, X.astype(np.float32).astype(np.float64), 2.0**-24)
    ref = ReferenceEvaluator(model).run(None, {"x": X.astype(np.float32)})[0]
    assert np.all(np.abs(ours - ref) <= bound)


def test_flatten_reshape_identity_and_constant_nodes(tmp_path):
    W = RNG.standard_normal((2, 3)).astype(np.float64)
    shape = numpy_helper.from_array(np.array([-1, 3], dtype=np.int64), "shape")
    nodes = [helper.make_node("Constant", [], ["W"], name="c", value=numpy_helper.from_array(W, "W")),
             helper.make_node("Flatten", ["x"], ["f"], name="flat", axis=1),
             helper.make_node("Reshape", ["f", "shape"], ["r"], name="reshape"),
             helper.make_node("Identity", ["r"], ["i"], name="id"),
             helper.make_node("Gemm", ["i", "W"], ["y"], name="g", transB=1)]
    onnx.save(_model(nodes, [shape], "float64", 3, 2), tmp_path / "f.onnx")
    case = import_model(tmp_path / "f.onnx", np.eye(3))
    assert_network_equals(case.network, [decode_array(W.view(np.uint64), "float64")], [[0, 0]])


def test_check_accepts_model_path_and_reports_dropped_activation(tmp_path, capsys):
    model, _, _ = _mlp("float32", widths=(2, 3, 2), final="Sigmoid")
    onnx.save(model, tmp_path / "s.onnx")
    np.save(tmp_path / "x.npy", RNG.standard_normal((20, 2)))
    report = check(str(tmp_path / "s.onnx"), sample=str(tmp_path / "x.npy"), pipelines="stored-dtype")
    assert report.extra["provenance"]["dropped_output_activation"] == "sigmoid"
    assert report.numeric["dtype"] == "float64"  # the default pipeline is float64
    assert report.numeric["stored_dtype"]["dtype"] == "float32"  # the stored dtype's pipeline, on request
    assert main(["check", str(tmp_path / "s.onnx"), "--sample", str(tmp_path / "x.npy")]) == 0
    assert "analysed before the output activation sigmoid" in capsys.readouterr().out
    out = tmp_path / "case.json"
    assert main(["import", str(tmp_path / "s.onnx"), "--sample", str(tmp_path / "x.npy"), "-o", str(out)]) == 0
    assert "sigmoid dropped" in capsys.readouterr().out
    assert main(["check", str(out), "--json"]) == 0
    assert '"dropped_output_activation": "sigmoid"' in capsys.readouterr().out


def _save(tmp_path, nodes, inits, n_in=3, n_out=2, fmt="float32"):
    p = tmp_path / "bad.onnx"
    onnx.save(_model(nodes, inits, fmt, n_in, n_out), p)
    return str(p)


def test_errors_are_one_line_exit_2(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros((2, 3)))
    x = str(tmp_path / "x.npy")
    W = numpy_helper.from_array(np.ones((2, 3), dtype=np.float32), "W")
    W4 = numpy_helper.from_array(np.ones((4, 3), dtype=np.float32), "W4")
    # unsupported op: names the node and the op
    p = _save(tmp_path, [helper.make_node("Gemm", ["x", "W"], ["z"], name="g", transB=1),
                         helper.make_node("Tanh", ["z"], ["y"], name="act")], [W])
    assert "node 'act' (Tanh): not piecewise linear" in _err(capsys, ["check", p, "--sample", x])
    # wrong shapes: names the node's weight
    p = _save(tmp_path, [helper.make_node("Gemm", ["x", "W"], ["z"], name="g1", transB=1),
                         helper.make_node("Relu", ["z"], ["h"], name="r"),
                         helper.make_node("Gemm", ["h", "W4"], ["y"], name="g2", transB=1)], [W, W4])
    assert "node 'g2' (Gemm): weight of shape (4, 3) does not apply to the data of shape (2,)" in _err(
        capsys, ["import", p])
    # two affine layers without a Relu
    W2 = numpy_helper.from_array(np.ones((2, 2), dtype=np.float32), "W2")
    p = _save(tmp_path, [helper.make_node("Gemm", ["x", "W"], ["z"], name="g1", transB=1),
                         helper.make_node("Gemm", ["z", "W2"], ["y"], name="g2", transB=1)], [W, W2])
    assert main(["import", p, "-o", str(tmp_path / "two.json")]) == 0  # linear units: a layer graph
    # a skip connection: a layer graph
    p = _save(tmp_path, [helper.make_node("Gemm", ["x", "W"], ["z"], name="g1", transB=1),
                         helper.make_node("Relu", ["z"], ["h"], name="r"),
                         helper.make_node("Add", ["h", "z"], ["y"], name="skip")], [W])
    assert main(["import", p, "-o", str(tmp_path / "skip.json")]) == 0
    assert json.loads((tmp_path / "skip.json").read_text())["layers"][-1]["op"] == "add"
    capsys.readouterr()
    # softmax over the samples
    p = _save(tmp_path, [helper.make_node("Gemm", ["x", "W"], ["z"], name="g", transB=1),
                         helper.make_node("Softmax", ["z"], ["y"], name="sm", axis=0)], [W])
    assert "node 'sm' (Softmax): Softmax over axis 0 is not over the outputs" in _err(capsys, ["import", p])
    # ends with a Relu
    p = _save(tmp_path, [helper.make_node("Gemm", ["x", "W"], ["z"], name="g", transB=1),
                         helper.make_node("Relu", ["z"], ["y"], name="r")], [W])
    assert "r: the network ends with an activation (relu)" in _err(capsys, ["import", p])
    # a bias that depends on the sample index
    Cn = numpy_helper.from_array(np.ones((5, 2), dtype=np.float32), "Cn")
    p = _save(tmp_path, [helper.make_node("Gemm", ["x", "W", "Cn"], ["y"], name="g", transB=1)], [W, Cn])
    assert "node 'g' (Gemm) Cn: bias of shape (5, 2) does not broadcast" in _err(capsys, ["import", p])
    # NaN weight: names the tensor and the index
    Wn = np.ones((2, 3), dtype=np.float32)
    Wn[1, 2] = np.nan
    p = _save(tmp_path, [helper.make_node("Gemm", ["x", "W"], ["y"], name="g", transB=1)],
              [numpy_helper.from_array(Wn, "W")])
    assert "node 'g' (Gemm) W[1][2]: expected a finite number, found nan" in _err(capsys, ["import", p])
    # corrupted: random bytes, and a truncated good file
    (tmp_path / "junk.onnx").write_bytes(b"\x08\x07garbage" * 10)
    assert "junk.onnx: corrupted or not a valid ONNX model" in _err(capsys, ["import", str(tmp_path / "junk.onnx")])
    good, _, _ = _mlp("float32")
    data = good.SerializeToString()
    (tmp_path / "cut.onnx").write_bytes(data[: len(data) // 2])
    assert "cut.onnx: corrupted or not a valid ONNX model" in _err(capsys, ["import", str(tmp_path / "cut.onnx")])
    # a sample of the wrong width
    onnx.save(good, tmp_path / "good.onnx")
    np.save(tmp_path / "x2.npy", np.zeros((2, 2)))
    assert "x2.npy: sample: rows have 2 entries, the network takes N_0 = 3" in _err(
        capsys, ["check", str(tmp_path / "good.onnx"), "--sample", str(tmp_path / "x2.npy")])
    # too large
    assert "larger than the limit" in _err(capsys, ["import", str(tmp_path / "good.onnx"), "--max-bytes", "100"])


def test_external_data_beside_the_model_read_and_outside_refused(tmp_path):
    Wv = RNG.standard_normal((2, 3)).astype(np.float32)
    W = numpy_helper.from_array(Wv, "W")
    W.data_location = TensorProto.EXTERNAL
    W.ClearField("raw_data")
    W.external_data.add(key="location", value="w.bin")
    (tmp_path / "w.bin").write_bytes(b"\0" * 8 + Wv.tobytes())
    W.external_data.add(key="offset", value="8")
    W.external_data.add(key="length", value=str(Wv.nbytes))
    p = _save(tmp_path, [helper.make_node("Gemm", ["x", "W"], ["y"], name="g", transB=1)], [W])
    case = import_model(p, RNG.standard_normal((4, 3)))  # read from the sibling file at its offset
    assert_network_equals(case.network, [decode_array(Wv.view(np.uint32), "float32")], [[0, 0]])
    # the same tensor pointing outside the model's folder, past the file's end, or at a wrong size: refused
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "link.bin").symlink_to(tmp_path / "w.bin")
    for location, offset, length, message in [
            ("../w.bin", 8, Wv.nbytes, "external data location '../w.bin' leaves the model's folder"),
            (str(tmp_path / "w.bin"), 8, Wv.nbytes, "is an absolute path"),
            ("w.bin", 16, Wv.nbytes, "is past the end of 'w.bin'"),
            ("w.bin", 0, 8, "external data length 8 is not the tensor's size 24 bytes"),
            ("nothere.bin", 0, 24, "nothere.bin: cannot read file")]:
        for e in W.external_data:
            e.value = {"location": location, "offset": str(offset), "length": str(length)}[e.key]
        p = _save(tmp_path, [helper.make_node("Gemm", ["x", "W"], ["y"], name="g", transB=1)], [W])
        with pytest.raises(CaseFormatError, match=re.escape(message)):
            import_model(p)
    for e in W.external_data:
        e.value = {"location": "link.bin", "offset": "8", "length": str(Wv.nbytes)}[e.key]
    nested = sub / "m.onnx"
    onnx.save(_model([helper.make_node("Gemm", ["x", "W"], ["y"], name="g", transB=1)], [W], "float32", 3, 2), nested)
    with pytest.raises(CaseFormatError, match=r"initializer 'W': external data location 'link.bin' is a link that "
                                              r"leaves the model's folder"):
        import_model(nested)
    two = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3]),
           helper.make_tensor_value_info("x2", TensorProto.FLOAT, ["n", 3])]
    model = _model([helper.make_node("Add", ["x", "x2"], ["y"], name="a")], [], "float32", 3, 3, inputs=two)
    onnx.save(model, tmp_path / "two.onnx")
    with pytest.raises(CaseFormatError, match=r"two.onnx: graph: expected one data input and one output, found 2"):
        import_model(tmp_path / "two.onnx")


def test_more_graph_validators(tmp_path, capsys):
    W = numpy_helper.from_array(np.ones((2, 3), dtype=np.float32), "W")
    b = numpy_helper.from_array(np.ones(2, dtype=np.float32), "b")
    gemm = helper.make_node("Gemm", ["x", "W"], ["z"], name="g", transB=1)
    none = "output: no Linear or convolution on the data path"
    cases = [
        ([helper.make_node("Relu", ["x"], ["y"], name="r")], [], none),
        ([helper.make_node("Sigmoid", ["x"], ["y"], name="s")], [], none),
        ([helper.make_node("Add", ["x", "b"], ["y"], name="a")], [b],
         "node 'a' (Add): adds a constant that is not the bias of a MatMul"),
        ([helper.make_node("Flatten", ["x"], ["f"], name="f", axis=0), helper.make_node("Gemm", ["f", "W"], ["y"],
          name="g", transB=1)], [W], "node 'f' (Flatten): only Flatten(axis=1) is supported"),
        ([gemm, helper.make_node("Reshape", ["z", "s"], ["y"], name="rs")],
         [W, numpy_helper.from_array(np.array([1, -1], dtype=np.int64), "s")],
         "node 'rs' (Reshape): Reshape of data of shape [2] to [1, -1]"),
        ([gemm, helper.make_node("Softmax", ["z"], ["s"], name="sm", axis=1),
          helper.make_node("Identity", ["s"], ["y"], name="i")], [W],
         "node 'sm' (Softmax): not piecewise linear inside the network"),
        ([helper.make_node("Add", ["x", "x"], ["y"], name="a")], [], none),
        ([helper.make_node("Gemm", ["x", "W"], ["z"], name="g1", transA=1, transB=1),
          helper.make_node("Relu", ["z"], ["h"], name="r"),
          helper.make_node("MatMul", ["W2", "h"], ["y"], name="m")],
         [W, numpy_helper.from_array(np.ones((2, 2), dtype=np.float32), "W2")],
         "node 'g1' (Gemm): only Gemm(data, W) with alpha = beta = 1 and transA = 0"),
        ([helper.make_node("MatMul", ["x", "V"], ["y"], name="m")],
         [numpy_helper.from_array(np.ones(3, dtype=np.float32), "V")], "node 'm' (MatMul) V: expected a weight matrix"),
        ([gemm, helper.make_node("Constant", [], ["y"], name="k", value=numpy_helper.from_array(
            np.ones((1, 2), dtype=np.float32), "k"))], [W], "the output 'y' is not computed from the data"),
    ]
    for k, (nodes, inits, message) in enumerate(cases):
        p = tmp_path / f"v{k}.onnx"
        onnx.save(_model(nodes, inits, "float32", 3, 2), p)
        code = main(["import", str(p)])
        err = capsys.readouterr().err
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (k, err)
    flat = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, 3])]
    onnx.save(_model([helper.make_node("Flatten", ["x"], ["y"], name="f")], [], "float32", 3, 3, inputs=flat),
              tmp_path / "nf.onnx")
    with pytest.raises(CaseFormatError, match=r"output: no Linear or convolution on the data path"):
        import_model(tmp_path / "nf.onnx")
    const = helper.make_node("Constant", [], ["c"], name="c", value_float=1.0)
    onnx.save(_model([const, gemm, helper.make_node("Identity", ["z"], ["y"], name="i")], [W], "float32", 3, 2),
              tmp_path / "cf.onnx")
    with pytest.raises(CaseFormatError, match=r"node 'c' \(Constant\): only Constant nodes with a tensor 'value'"):
        import_model(tmp_path / "cf.onnx")


def test_crosscheck_catches_a_wrong_import(tmp_path):
    from exactident import InvariantViolation
    from exactident.io.importers.onnx_model import crosscheck, read_onnx

    model, _, _ = _mlp("float32", widths=(2, 3, 2))
    onnx.save(model, tmp_path / "m.onnx")
    g = read_onnx(str(tmp_path / "m.onnx"), 2**20)
    net = g.imported.network("m.onnx")
    net.b[-1][0] += 1  # an import that misread one bias
    with pytest.raises(InvariantViolation, match=r"m.onnx: the imported network does not reproduce onnx.reference: "
                                                 r"row \d+, output 0"):
        crosscheck(g, net, np.zeros((3, 2)), "m.onnx")
