"""PyTorch import: state dicts (torch.load weights_only=True only), nn.Sequential in memory, safetensors from torch.

Right values: each weight's exact value is decoded from the tensor's bits in
the test; the framework output is the module's own forward pass in its dtype,
which the imported network's float64 forward pass must match within the
dtype's rounding bound.  Skipped without torch.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from _importers import UNIT_ROUNDOFF, assert_network_equals, decode_array, float_forward
from _importers import bad_input_error as _err

torch = pytest.importorskip("torch")

from exactident import CaseFormatError, from_torch, import_model  # noqa: E402

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}
BITS = {"float16": torch.int16, "bfloat16": torch.int16, "float32": torch.int32, "float64": torch.int64}
MASK = {"float16": 0xFFFF, "bfloat16": 0xFFFF, "float32": 0xFFFFFFFF, "float64": 0xFFFFFFFFFFFFFFFF}


def _bits(t, fmt):
    """Unsigned bit patterns of a tensor (torch has no unsigned views for every width: mask the signed ones)."""
    signed = t.detach().contiguous().view(BITS[fmt]).numpy().astype(object)
    return np.vectorize(lambda v: int(v) & MASK[fmt], otypes=[object])(signed)


def _net(fmt, bias_last=True):
    torch.manual_seed(3)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 5),
                              torch.nn.ReLU(), torch.nn.Linear(5, 3, bias=bias_last))
    return net.to(DTYPES[fmt]).eval()


def _expected(net, fmt):
    lin = [m for m in net if isinstance(m, torch.nn.Linear)]
    W = [decode_array(_bits(m.weight, fmt), fmt) for m in lin]
    b = [decode_array(_bits(m.bias, fmt), fmt)[0] if m.bias is not None else [0] * m.out_features for m in lin]
    return W, b


def _framework_matches(case, net, fmt, X):
    Xt = torch.tensor(X).to(DTYPES[fmt])
    with torch.no_grad():
        theirs = net(Xt).double().numpy()
    ours, bound = float_forward(case.network, Xt.double().numpy(), UNIT_ROUNDOFF[fmt])
    # torch may accumulate half precision in float32 and round intermediate results: one extra rounding each
    assert np.all(np.abs(ours - theirs) <= 2 * bound + UNIT_ROUNDOFF[fmt] * np.abs(theirs))


@pytest.mark.parametrize("fmt", list(DTYPES))
def test_state_dict_exact_and_forward(tmp_path, fmt):
    net = _net(fmt, bias_last=False)
    torch.save(net.state_dict(), tmp_path / "m.pt")
    X = np.random.default_rng(1).standard_normal((9, 4))
    np.save(tmp_path / "x.npy", X)
    case = import_model(tmp_path / "m.pt", tmp_path / "x.npy", assume_relu_mlp=True)
    W, b = _expected(net, fmt)
    assert_network_equals(case.network, W, b)
    assert case.provenance["weight_dtype"] == fmt and case.provenance["format"] == "torch-state-dict"
    _framework_matches(case, net, fmt, X)


@pytest.mark.parametrize("fmt", list(DTYPES))
def test_module_in_memory(fmt):
    net = _net(fmt)
    X = np.random.default_rng(2).standard_normal((5, 4))
    case = from_torch(net, X)
    W, b = _expected(net, fmt)
    assert_network_equals(case.network, W, b)
    _framework_matches(case, net, fmt, X)


def test_module_final_softmax_dropped_and_errors():
    lin = torch.nn.Linear(3, 2)
    case = from_torch(torch.nn.Sequential(lin, torch.nn.Softmax(dim=1)), np.zeros((1, 3)))
    assert case.provenance["dropped_output_activation"] == "softmax" and case.widths == (3, 2)
    assert from_torch(lin).widths == (3, 2)  # a single Linear: the affine case
    with pytest.raises(CaseFormatError, match=r": 1 \(Tanh\): not piecewise linear"):
        from_torch(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh(), torch.nn.Linear(2, 1)))
    with pytest.raises(CaseFormatError, match=r": 1: the network ends with an activation \(relu\)"):
        from_torch(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()))
    with pytest.raises(CaseFormatError, match=r": 1 \(Softmax\): not piecewise linear inside the network"):
        from_torch(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Softmax(dim=1), torch.nn.Linear(2, 1)))
    with pytest.raises(CaseFormatError, match=r": 1 \(Softmax\): softmax over dim 0 is not over the outputs"):
        from_torch(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Softmax(dim=0)))
    with pytest.raises(CaseFormatError, match=r"expected a torch.nn.Sequential"):
        from_torch(object())
    with pytest.raises(CaseFormatError, match=r"W?2.weight: shape \(1, 3\) does not follow 0.weight"):
        from_torch(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU(), torch.nn.Linear(3, 1)))


class _Evil:
    def __reduce__(self):
        return (print, ("unpickled!",))


def test_state_dict_errors(tmp_path, capsys):
    # a pickle of arbitrary objects: torch.load(weights_only=True) refuses it, nothing runs
    torch.save({"0.weight": _Evil()}, tmp_path / "evil.pt")
    err = _err(capsys, ["import", str(tmp_path / "evil.pt")])
    assert "evil.pt: refused: not a plain state dict of tensors" in err
    assert "unpickled!" not in capsys.readouterr().out
    # a whole module (needs full unpickling): refused
    torch.save(_net("float32"), tmp_path / "module.pt")
    err = _err(capsys, ["import", str(tmp_path / "module.pt")])
    assert "module.pt: a whole pickled module of class torch.nn.modules.container.Sequential (torch.save(model)) " \
           "is refused, never unpickled; save model.state_dict()" in err
    # a plain pickle / joblib file: never opened
    (tmp_path / "m.pkl").write_bytes(pickle.dumps({"a": 1}))
    assert "m.pkl: pickle files are never loaded" in _err(capsys, ["import", str(tmp_path / "m.pkl")])
    (tmp_path / "m.weights").write_bytes(pickle.dumps({"a": 1}))
    assert "m.weights: file is a pickle: refused" in _err(capsys, ["import", str(tmp_path / "m.weights")])
    # corrupted
    torch.save(_net("float32").state_dict(), tmp_path / "ok.pt")
    data = (tmp_path / "ok.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    assert "cut.pt: corrupted or not a PyTorch file" in _err(capsys, ["import", str(tmp_path / "cut.pt")])
    # not a Linear/ReLU network
    torch.save(torch.nn.BatchNorm1d(3).state_dict(), tmp_path / "bn.pt")
    assert "bn.pt: weight: shape (3,) is not a Linear weight" in _err(capsys, ["import", str(tmp_path / "bn.pt")])
    torch.save({"a.weight": torch.zeros(2, 3), "a.running_mean": torch.zeros(2)}, tmp_path / "rm.pt")
    assert "rm.pt: a.running_mean: not a Linear layer's weight or bias" in _err(capsys, ["import",
                                                                                         str(tmp_path / "rm.pt")])
    # a convolution's state dict: said to be one, and where convolutions are read (not "only Linear/ReLU")
    torch.save({"conv.weight": torch.zeros(2, 1, 3, 3)}, tmp_path / "conv.pt")
    err = _err(capsys, ["import", str(tmp_path / "conv.pt")])
    assert err.strip().endswith(
        "conv.pt: conv.weight: shape (2, 1, 3, 3) is a convolution kernel: a weights file is read only as a plain "
        "Linear→ReLU chain; convolutions, average pooling, skip connections, leaky ReLU and PReLU are read from the "
        "model itself: its module (exactident.from_torch(module, X) in Python) or its ONNX export (exactident check "
        "model.onnx --sample DATA)"), err
    assert "only Linear/ReLU networks are supported" not in err
    # a transposed matrix is spotted and named
    torch.save({"a.weight": torch.zeros(4, 3), "b.weight": torch.zeros(4, 2)}, tmp_path / "t.pt")
    assert "b.weight: shape (4, 2) does not follow a.weight" in _err(capsys, ["import", str(tmp_path / "t.pt")])
    torch.save({"a.weight": torch.zeros(4, 3), "a.bias": torch.zeros(3)}, tmp_path / "tb.pt")
    assert "a.bias: expected a vector of length 4" in _err(capsys, ["import", str(tmp_path / "tb.pt")])
    torch.save({"a.bias": torch.zeros(3)}, tmp_path / "nob.pt")
    assert "a.bias: bias without a weight" in _err(capsys, ["import", str(tmp_path / "nob.pt")])
    torch.save([torch.zeros(3)], tmp_path / "list.pt")
    assert "list.pt: expected a state dict" in _err(capsys, ["import", str(tmp_path / "list.pt")])
    torch.save({"a.weight": 3}, tmp_path / "int.pt")
    assert "int.pt: a.weight: expected a tensor, found int" in _err(capsys, ["import", str(tmp_path / "int.pt")])


def test_safetensors_from_torch_bfloat16(tmp_path):
    st = pytest.importorskip("safetensors.torch")
    net = _net("bfloat16")
    sd = {k.replace("1.", "layer1.").replace("3.", "layer3.").replace("5.", "layer10."): v
          for k, v in net.state_dict().items()}  # natural order: layer1 < layer3 < layer10
    st.save_file(sd, tmp_path / "m.safetensors")
    case = import_model(tmp_path / "m.safetensors", np.zeros((1, 4)), assume_relu_mlp=True)
    W, b = _expected(net, "bfloat16")
    assert_network_equals(case.network, W, b)
    assert case.provenance["weight_dtype"] == "bfloat16" and case.provenance["format"] == "safetensors"


def test_module_more_validators():
    with pytest.raises(CaseFormatError, match=r"forward: cannot be traced by torch.fx on the sample \(RuntimeError: "
                                              r"mat1 and mat2 shapes cannot be multiplied"):
        from_torch(torch.nn.Sequential(torch.nn.Flatten(start_dim=0), torch.nn.Linear(3, 2)))
    with pytest.raises(CaseFormatError, match=r"forward: no Linear or convolution layer"):
        from_torch(torch.nn.Sequential(torch.nn.Identity()))
    nested = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU()), torch.nn.Linear(4, 1))
    assert from_torch(nested).widths == (3, 4, 1)
