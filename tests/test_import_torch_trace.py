"""Subclassed PyTorch modules, read by tracing (``torch.fx``) and forward-checked against the module itself.

Right values: each imported weight must be the exact value of the module's parameter (``Fraction`` of the
float64 widening, which is exact for every float dtype), and the module's own forward pass (run by PyTorch)
must match the imported network within the rounding bound.  Refusals are one line naming the module path
or node and the op.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from exactident import CaseFormatError, from_torch  # noqa: E402


def _fractions(t):
    a = t.detach().double().numpy()
    return [[Fraction(float(v)) for v in row] for row in np.atleast_2d(a)]


def _assert_exact(case, linears):
    """``linears``: (weight, bias or None) pairs in the order of the data path."""
    assert len(case.network.W) == len(linears)
    for l, (w, b) in enumerate(linears):
        M = case.network.W[l]
        assert [[Fraction(int(M[i, j].p), int(M[i, j].q)) for j in range(M.ncols())] for i in range(M.nrows())] == \
            _fractions(w)
        got = [Fraction(int(v.p), int(v.q)) for v in case.network.b[l]]
        assert got == (_fractions(b)[0] if b is not None else [0] * len(got))


class _Subclassed(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(6, 8), nn.Linear(8, 3)
        self.drop = nn.Dropout(0.4)

    def forward(self, x):
        x = x.view(x.size(0), -1)
        return F.softmax(self.fc2(self.drop(F.relu(self.fc1(x)))), dim=1)


class _Loop(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(6, 5), nn.Linear(5, 5, bias=False)])
        self.head = nn.Linear(5, 2)

    def forward(self, x):
        x = torch.flatten(x, 1)
        for layer in self.layers:
            x = layer(x).relu()
        x = F.dropout(x, 0.5, training=self.training)
        return self.head(x.reshape(-1, 5))


class _Functional(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 6))
        self.b = nn.Parameter(torch.randn(4))
        self.out = nn.Sequential(nn.Identity(), nn.Linear(4, 1))

    def forward(self, x):
        return self.out(torch.relu(F.linear(x, self.w, self.b)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_subclassed_modules_imported_exactly_and_forward_checked(dtype):
    torch.manual_seed(0)
    X = np.random.default_rng(0).standard_normal((10, 6))
    m = _Subclassed().to(dtype).train()
    case = from_torch(m, X)
    _assert_exact(case, [(m.fc1.weight, m.fc1.bias), (m.fc2.weight, m.fc2.bias)])
    assert case.provenance["dropped_output_activation"] == "softmax"
    assert case.provenance["forward_check"].startswith("torch forward of _Subclassed on 10 rows")
    assert m.training  # restored
    m = _Loop().to(dtype)
    case = from_torch(m, X)
    _assert_exact(case, [(m.layers[0].weight, m.layers[0].bias), (m.layers[1].weight, None),
                         (m.head.weight, m.head.bias)])
    assert case.widths == (6, 5, 5, 2) and "within the rounding bound" in case.provenance["forward_check"]
    m = _Functional().to(dtype)
    case = from_torch(m, X)
    _assert_exact(case, [(m.w, m.b), (m.out[1].weight, m.out[1].bias)])


class _Leaky(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(4, 8), nn.LeakyReLU(), nn.Linear(8, 1)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class _Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 1)

    def forward(self, x):
        h = F.relu(self.fc1(x))
        return self.fc3(h + F.relu(self.fc2(h)))


class _Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.fc = nn.Conv2d(1, 2, 3), nn.Linear(8, 1)

    def forward(self, x):
        x = x.view(-1, 1, 4, 4)  # a helper op first: the error names the convolution
        return self.fc(F.relu(self.conv(x)).flatten(1))


class _BatchNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU())
        self.out = nn.Linear(3, 1)

    def forward(self, x):
        return self.out(self.block(x))


class _TwoLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 3), nn.Linear(3, 1)

    def forward(self, x):
        return self.b(self.a(x))


class _Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        if x.sum() > 0:
            return self.fc(x)
        return -self.fc(x)


@pytest.mark.parametrize("cls, message", [
    (_BatchNorm, "<test_import_torch_trace._BatchNorm>: block.1 (BatchNorm1d): exact folding is impossible "
                 "(sqrt(var + eps) is irrational); fold it in float64 with --fold-batchnorm"),
    (_Branchy, "forward: cannot be traced by torch.fx on the sample (TraceError: symbolically traced variables cannot "
               "be used as inputs to control flow)"),
])
def test_refusals_are_one_line_naming_module_and_op(cls, message):
    with pytest.raises(CaseFormatError) as info:
        from_torch(cls(), np.zeros((2, 4)))
    text = str(info.value)
    assert message in text and "\n" not in text, text


class _TracedOtherwise(nn.Module):
    """Python control flow on a plain attribute: tracing records one branch, the module later runs another."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(3, 4), nn.Linear(4, 2)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        h = F.relu(self.fc1(x))
        return self.fc2(h) if self.calls == 1 else self.fc2(h) * 2


def test_forward_check_catches_a_module_that_is_not_its_trace():
    torch.manual_seed(5)
    with pytest.raises(CaseFormatError, match=r"forward check: the imported network differs from torch forward of "
                                              r"_TracedOtherwise at sample 0, output \d"):
        from_torch(_TracedOtherwise(), np.random.default_rng(1).standard_normal((4, 3)))


def test_parameter_names_kept_in_the_case_and_shown_by_explain(tmp_path):
    from exactident import check
    from exactident.explain.core import explain
    from exactident.explain.render import render_explanation
    from exactident.io.case import dump_case, load_case, parse_case

    torch.manual_seed(0)
    m = _Subclassed()
    case = from_torch(m, np.random.default_rng(0).standard_normal((5, 6)))
    names = {"W_1": "fc1.weight[i,j]", "b_1": "fc1.bias[i]", "W_2": "fc2.weight[i,j]", "b_2": "fc2.bias[i]"}
    assert case.provenance["parameter_names"] == names
    (tmp_path / "c.json").write_text(dump_case(case))
    again = load_case(tmp_path / "c.json")
    assert again.provenance["parameter_names"] == names
    report = check(again, numeric=False)
    assert report.extra["provenance"]["parameter_names"] == names  # the report carries them
    text = render_explanation(*explain(again, report=report))
    # W_2[2,0] of the paper is fc2.weight[2,0] of the module: the same indices, shown side by side
    by_class = text.split("parameters by class:")[1].split("kernel directions")[0]
    line = next(t for t in by_class.splitlines() if "W_2[" in t)
    assert "fc2.weight[" in line and line.index("W_2[") < line.index("fc2.weight[")
    obj = {"format": "exactident-case/1", "name": "t", "widths": [1, 1], "weights": [[["1"]]], "biases": [["0"]],
           "sample": [], "provenance": {"parameter_names": {"W_x": "a"}}}
    with pytest.raises(CaseFormatError, match=r"provenance.parameter_names.W_x: expected a key W_l or b_l"):
        parse_case(obj, "a.json")
    obj["provenance"] = {"parameter_names": {"W_1": 3}}
    with pytest.raises(CaseFormatError, match=r"provenance.parameter_names.W_1: expected a string"):
        parse_case(obj, "a.json")


class _Block(nn.Module):
    def __init__(self, a, b):
        super().__init__()
        self.lin, self.act = nn.Linear(a, b), nn.ReLU(inplace=True)

    def forward(self, x):
        return self.act(self.lin(x))


class _Blocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(_Block(4, 5), _Block(5, 6))  # a Sequential of custom blocks: traced
        self.out = nn.Linear(6, 2)

    def forward(self, x):
        x = x.reshape(x.shape[0], -1)
        return torch.sigmoid(self.out(F.relu(self.body(x), inplace=True)))  # relu(relu(z)) = relu(z)


def test_custom_blocks_double_relu_and_sigmoid():
    torch.manual_seed(6)
    m = _Blocks()
    case = from_torch(m, np.random.default_rng(2).standard_normal((7, 4)))
    _assert_exact(case, [(m.body[0].lin.weight, m.body[0].lin.bias), (m.body[1].lin.weight, m.body[1].lin.bias),
                         (m.out.weight, m.out.bias)])
    assert case.provenance["dropped_output_activation"] == "sigmoid"
    assert case.provenance["parameter_names"]["W_2"] == "body.1.lin.weight[i,j]"


@pytest.mark.parametrize("cls, shape, ops", [
    (_Leaky, (5, 4), ["linear", "leaky_relu", "linear"]),
    (_Residual, (5, 4), ["linear", "relu", "linear", "relu", "add", "linear"]),
    (_Conv, (5, 16), ["conv2d", "relu", "flatten", "linear"]),
    (_TwoLinear, (5, 4), ["linear", "linear"]),
])
def test_formerly_refused_modules_read_as_layer_graphs(cls, shape, ops):
    from exactident.io.importers.objects import torch_document

    torch.manual_seed(0)
    doc = torch_document(cls(), np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    assert doc["format"] == "exactident-case/2" and [layer["op"] for layer in doc["layers"]] == ops
    assert "within the rounding bound" in doc["provenance"]["forward_check"]
