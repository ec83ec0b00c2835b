"""ONNX as PyTorch exports it today: the default ``torch.onnx.export`` (dynamo, weights in ``model.onnx.data``
beside the model) and the legacy exporter (``dynamo=False``: ``Shape``/``Gather``/``Concat`` chains for
``x.view``, ``Mod``/``Slice`` chains for ``nn.Unflatten``); helper ops on constant weights; the first
unsupported compute op named.

Right values: each imported weight is the exact value of the module's parameter (``Fraction`` of its float64
widening), and the module's own forward pass must match the imported network within the rounding bound;
the ONNX cross-check against ``onnx.reference`` runs on every import.  Skipped without torch and onnx.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxscript")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from exactident import CaseFormatError, import_model  # noqa: E402

nn = torch.nn
F = torch.nn.functional


class _Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(6, 40), nn.Linear(40, 3)

    def forward(self, x):
        x = x.view(x.size(0), -1)
        return F.softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


class _Unflatten(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(6, 40), nn.ReLU(), nn.Unflatten(1, (5, 8)), nn.Flatten(), nn.Linear(40, 2))

    def forward(self, x):
        return self.seq(x)


class _Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.fc = nn.Conv1d(1, 2, 3), nn.Linear(8, 1)

    def forward(self, x):
        return self.fc(F.relu(self.conv(x.unsqueeze(1))).flatten(1))


def _export(module, path, dynamo):
    kw = ({"dynamic_shapes": ({0: torch.export.Dim("batch")},)} if dynamo else
          {"dynamo": False, "input_names": ["x"], "dynamic_axes": {"x": {0: "n"}}})
    quiet = contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO())
    with warnings.catch_warnings(), quiet[0], quiet[1]:
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.zeros(3, 6, dtype=next(module.parameters()).dtype),), str(path), **kw)


def _exact(t):
    return [[Fraction(float(v)) for v in row] for row in np.atleast_2d(t.detach().double().numpy())]


def _rows(M):
    return [[Fraction(int(M[i, j].p), int(M[i, j].q)) for j in range(M.ncols())] for i in range(M.nrows())]


@pytest.mark.parametrize("dynamo", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_torch_exports_imported_exactly(tmp_path, dynamo, dtype):
    torch.manual_seed(0)
    X = np.random.default_rng(0).standard_normal((9, 6))
    for cls in (_Mlp, _Unflatten):
        m = cls().to(dtype).eval()
        path = tmp_path / f"{cls.__name__}.onnx"
        _export(m, path, dynamo)
        if dynamo and dtype == torch.float64:
            assert (tmp_path / f"{cls.__name__}.onnx.data").exists()  # the weights live beside the model
        case = import_model(path, X)
        linears = [mod for mod in m.modules() if isinstance(mod, nn.Linear)]
        assert [_rows(W) for W in case.network.W] == [_exact(lin.weight) for lin in linears]
        assert [[Fraction(int(v.p), int(v.q)) for v in b] for b in case.network.b] == \
            [_exact(lin.bias)[0] for lin in linears]
        assert "within the rounding bound" in case.provenance["crosscheck"]
        first, last = ("fc1", "fc2") if cls is _Mlp else ("seq.0", "seq.4")
        assert case.provenance["parameter_names"] == {  # the module's names, kept by both exporters
            "W_1": f"{first}.weight[i,j]", "b_1": f"{first}.bias[i]", "W_2": f"{last}.weight[i,j]",
            "b_2": f"{last}.bias[i]"}
        # the module itself agrees with the imported network on the sample (as from_torch checks it)
        from exactident.io.importers.forward_check import forward_check
        from exactident.io.importers.reference import run_module

        logits = (lambda x, m=m: m.fc2(F.relu(m.fc1(x)))) if cls is _Mlp else None
        Y, Xin, name = run_module(m, X, logits)
        assert "within the rounding bound" in forward_check(case.network, Xin, Y, [name], "m", "torch")


@pytest.mark.parametrize("dynamo", [True, False])
def test_convolution_after_an_unsqueeze_of_the_input_is_a_layer_graph(tmp_path, dynamo):
    from exactident.io.importers.load import import_document

    _export(_Conv().eval(), tmp_path / "c.onnx", dynamo)
    doc = import_document(tmp_path / "c.onnx", np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32))
    assert doc["input_shape"] == [1, 6] and [layer["op"] for layer in doc["layers"]] == [
        "conv1d", "relu", "flatten", "linear"]
    assert "within the rounding bound" in doc["provenance"]["forward_check"]


def test_helper_ops_on_constant_weights(tmp_path):
    """Transpose of a weight stored (in, out), Identity of a weight, Cast of a float16 weight, Unsqueeze of a
    bias, Reshape of the data to (n, 2, 2) and back by Flatten: the weights read are the stored values, moved."""
    rng = np.random.default_rng(3)
    Wt = rng.standard_normal((4, 3)).astype(np.float32)  # (N_0, N_1): transposed by the graph
    Wk = rng.standard_normal((3, 4)).astype(np.float32)  # MatMul layout (N_1, N_2)
    W2 = rng.standard_normal((1, 4)).astype(np.float16)  # cast to float32 by the graph
    b1 = rng.standard_normal(3).astype(np.float32)
    inits = [numpy_helper.from_array(Wt, "Wt"), numpy_helper.from_array(Wk, "Wk"), numpy_helper.from_array(W2, "W2h"),
             numpy_helper.from_array(b1, "b1"), numpy_helper.from_array(np.array([0], dtype=np.int64), "ax"),
             numpy_helper.from_array(np.array([0, 2, 2], dtype=np.int64), "sq")]
    nodes = [helper.make_node("Transpose", ["Wt"], ["W1"], name="t", perm=[1, 0]),
             helper.make_node("Unsqueeze", ["b1", "ax"], ["b1u"], name="u"),
             helper.make_node("Gemm", ["x", "W1", "b1u"], ["z1"], name="g1", transB=1),
             helper.make_node("Relu", ["z1"], ["h1"], name="r1"),
             helper.make_node("Identity", ["Wk"], ["Wk2"], name="id"),
             helper.make_node("MatMul", ["h1", "Wk2"], ["z2"], name="m2"),
             helper.make_node("Reshape", ["z2", "sq"], ["z2s"], name="rs"),
             helper.make_node("Relu", ["z2s"], ["h2s"], name="r2"),
             helper.make_node("Flatten", ["h2s"], ["h2"], name="fl", axis=1),
             helper.make_node("Cast", ["W2h"], ["W2"], name="c", to=TensorProto.FLOAT),
             helper.make_node("Gemm", ["h2", "W2"], ["y"], name="g2", transB=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 1])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "h.onnx")
    case = import_model(tmp_path / "h.onnx", rng.standard_normal((5, 4)))
    assert case.widths == (4, 3, 4, 1)
    assert _rows(case.network.W[0]) == [[Fraction(float(v)) for v in row] for row in Wt.T]
    assert _rows(case.network.W[1]) == [[Fraction(float(v)) for v in row] for row in Wk.T]
    assert _rows(case.network.W[2]) == [[Fraction(float(v)) for v in W2[0]]]
    assert [Fraction(int(v.p), int(v.q)) for v in case.network.b[0]] == [Fraction(float(v)) for v in b1]
    assert "within the rounding bound" in case.provenance["crosscheck"]
    # the data reshaped to (n, 2, 2) then multiplied: refused, naming the node
    nodes = nodes[:8] + [helper.make_node("MatMul", ["h2s", "W2"], ["y"], name="bad")]
    nodes.insert(8, helper.make_node("Cast", ["W2h"], ["W2"], name="c", to=TensorProto.FLOAT))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 1])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "b.onnx")
    with pytest.raises(CaseFormatError, match=r"node 'rs' \(Reshape\): Reshape of data of shape \[4\] to \[0, 2, 2\]"):
        import_model(tmp_path / "b.onnx")
