"""Only the network that runs is imported: forward hooks and tied weights refused, a sample always required,
messages that say what to do, and the sample analysed as the module sees it.

Right values: a hooked module computes something the torch.fx trace does not see (checked here by running
it); a tied module has fewer parameters than its untied reading (the test counts them); the float32 values a
float32 module sees are computed here by numpy's own float64 -> float32 conversion, independently of torch.
Every refusal is one line naming the file or module and the field, exit 2 from the CLI.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from _importers import bad_input_error as _err

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import exactident  # noqa: E402
from exactident import CaseFormatError, check, from_torch, import_model  # noqa: E402

X = np.random.default_rng(0).standard_normal((10, 3))


def _mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(3, 4), nn.Linear(4, 2)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


# ------------------------------------------------------------------------------------------------ hooks

def _far_hook(module, inputs, output):
    """Adds 0 on the sample (|x| < 10) and 1e5 far from it: invisible to a forward check on the sample."""
    x = inputs[0]
    return output + 1e5 * (x.abs().amax(dim=1, keepdim=True) > 100).to(output.dtype)


def test_the_far_hook_changes_the_module_only_away_from_the_sample():
    module = _Net().eval()
    handle = module.register_forward_hook(_far_hook)
    with torch.no_grad():
        far = torch.tensor([[200.0, 0.0, 0.0]])
        assert torch.equal(module(torch.tensor(X, dtype=torch.float32)),
                           module.fc2(F.relu(module.fc1(torch.tensor(X, dtype=torch.float32)))))
        assert (module(far) - module.fc2(F.relu(module.fc1(far)))).abs().max() > 9e4
    handle.remove()


@pytest.mark.parametrize("build", [_Net, _mlp], ids=["traced", "sequential"])
@pytest.mark.parametrize("where", ["root", "submodule", "pre-hook"])
def test_a_hooked_module_is_refused(build, where):
    module = build()
    sub = module.fc1 if isinstance(module, _Net) else module[0]
    if where == "root":
        handle = module.register_forward_hook(_far_hook)
        label = f"the module ({type(module).__name__}): has a forward hook"
    elif where == "submodule":
        handle = sub.register_forward_hook(lambda m, i, o: o)
        label = f"{'fc1' if isinstance(module, _Net) else '0'} (Linear): has a forward hook"
    else:
        handle = sub.register_forward_pre_hook(lambda m, i: None)
        label = f"{'fc1' if isinstance(module, _Net) else '0'} (Linear): has a forward pre-hook"
    try:
        with pytest.raises(CaseFormatError) as info:
            from_torch(module, X)
        assert label in str(info.value) and "torch.fx does not trace it" in str(info.value)
        assert "\n" not in str(info.value)
    finally:
        handle.remove()
    assert from_torch(module, X).widths == (3, 4, 2)  # without the hook: imported


@pytest.mark.parametrize("register", ["register_module_forward_hook", "register_module_forward_pre_hook"])
def test_a_global_hook_is_refused(register, tmp_path):
    module = _Net()
    hook = (lambda m, i, o: o) if register.endswith("_hook") and "pre" not in register else (lambda m, i: None)
    handle = getattr(torch.nn.modules.module, register)(hook)
    try:
        with pytest.raises(CaseFormatError, match=r"forward: a global forward hook is registered"):
            from_torch(module, X)
        # a module given as reference for a state dict is refused the same way
        torch.save(module.state_dict(), tmp_path / "m.pt")
        with pytest.raises(CaseFormatError, match=r"a global forward hook is registered"):
            import_model(tmp_path / "m.pt", X, reference=module)
    finally:
        handle.remove()


# ------------------------------------------------------------------------------------------------ tied weights

class _AppliedTwice(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.out = nn.Linear(3, 3), nn.Linear(3, 1)

    def forward(self, x):
        return self.out(F.relu(self.fc(F.relu(self.fc(x)))))


class _Autoencoder(nn.Module):  # the decoder uses the encoder's weight, transposed
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(3, 2)
        self.dec_bias = nn.Parameter(torch.zeros(3))

    def forward(self, x):
        return F.linear(F.relu(self.enc(x)), self.enc.weight.t(), self.dec_bias)


def _shared_sequential():
    torch.manual_seed(0)
    a, b = nn.Linear(3, 3), nn.Linear(3, 3)
    b.weight = a.weight  # two layers holding one tensor
    return nn.Sequential(a, nn.ReLU(), b, nn.ReLU(), nn.Linear(3, 1))


def _same_layer_sequential():
    torch.manual_seed(0)
    fc = nn.Linear(3, 3)
    return nn.Sequential(fc, nn.ReLU(), fc, nn.ReLU(), nn.Linear(3, 1))


@pytest.mark.parametrize(("build", "message"), [
    (_AppliedTwice, "fc.weight: tied weights: fc.weight is used 2 times"),
    (_Autoencoder, "enc.weight: tied weights: enc.weight is used 2 times"),
    (_shared_sequential, "0.weight: tied weights: 0.weight and 2.weight are one tensor"),
    (_same_layer_sequential, "0.weight: tied weights"),
])
def test_tied_weights_are_refused(build, message):
    module = build()
    # (each use read as its own W_l would give the untied network, with more parameters than the module has)
    with pytest.raises(CaseFormatError) as info:
        from_torch(module, X)
    assert message in str(info.value) and "tied networks are not supported" in str(info.value)


def test_tied_weights_in_a_state_dict_are_refused(tmp_path, capsys):
    torch.save(_shared_sequential().state_dict(), tmp_path / "tied.pt")
    np.save(tmp_path / "X.npy", X)
    err = _err(capsys, ["check", str(tmp_path / "tied.pt"), "--sample", str(tmp_path / "X.npy"),
                        "--assume-relu-mlp"])
    assert "tied.pt: 2.weight: tied weights: 0.weight and 2.weight are one tensor" in err


# ------------------------------------------------------------------------------------------------ a sample, always

def test_every_api_entry_point_needs_the_sample_of_a_model_file(tmp_path):
    torch.save(_mlp().state_dict(), tmp_path / "model_state.pt")
    np.savez(tmp_path / "m.npz", W1=np.ones((2, 1)), W2=np.ones((1, 2)))
    for path in (tmp_path / "model_state.pt", tmp_path / "m.npz"):
        for call in (check, exactident.explain, exactident.design, exactident.crosscheck):
            with pytest.raises(CaseFormatError, match=rf"{path.name}: sample: a model file needs a sample: give "
                                                      r"sample=X"):
                call(str(path), assume_relu_mlp=True)
    # with its sample and the statement, analysed.  By hand: f = relu(x) + relu(x) (W_2 fixed edges), x = 1, 2,
    # both units active on both samples: Gamma's rows are (x, x, 1, 1, 1) in (W_1[0], W_1[1], b_1[0], b_1[1], b_2),
    # rank 2 = N_L rank alpha = rank A < dim = 5: C_N fails, not identifiable (Theorem 8)
    np.save(tmp_path / "x.npy", np.array([[1.0], [2.0]]))
    assert check(str(tmp_path / "m.npz"), sample=str(tmp_path / "x.npy"), assume_relu_mlp=True,
                 numeric=False).verdict == "not-identifiable"


def test_a_model_object_given_to_check_points_to_its_importer():
    with pytest.raises(CaseFormatError, match=r"<check>: case: expected a Case or a path, found Sequential; a "
                                              r"PyTorch module is imported with exactident.from_torch\(module, X\)"):
        check(_mlp())


def test_a_sample_file_given_as_the_model_says_what_it_was_taken_as(tmp_path, capsys):
    np.save(tmp_path / "X.npy", X)
    x = str(tmp_path / "X.npy")
    err = _err(capsys, ["check", x, "--sample", x])
    assert err.strip() == (f"error: {x}: CASE: taken as a sample file (.npy holds an array), given where a case file "
                           "(.json) or a model file (.onnx, .pt, .safetensors, .keras, .npz) is expected: "
                           "exactident check MODEL --sample DATA")
    assert "case files hold their own sample" not in err
    # the usage hint is the command's own
    assert _err(capsys, ["explain", x, "--sample", x]).strip().endswith("exactident explain MODEL --sample DATA")
    assert _err(capsys, ["verify-certificate", x, x, "--sample", x]).strip().endswith(
        "exactident verify-certificate MODEL REPORT.json --sample DATA")


# ------------------------------------------------------------------------------------------------ float32 view

def _exact(rows):
    return [[Fraction(int(v.p), int(v.q)) for v in row] for row in rows]


@pytest.mark.parametrize("build", [_mlp, lambda: nn.Sequential(nn.Linear(3, 4), nn.LeakyReLU(), nn.Linear(4, 2))],
                         ids=["mlp", "layer-graph"])
def test_a_float64_sample_is_analysed_as_the_float32_module_sees_it(build):
    module = build()
    case = from_torch(module, X)  # X is float64; the module computes in float32
    seen = [[Fraction(float(v)) for v in row] for row in X.astype(np.float32)]  # numpy's rounding, not torch's
    assert _exact(case.X) == seen and seen != [[Fraction(float(v)) for v in row] for row in X]
    assert case.provenance["sample_rounding"] == ("float64 sample rounded to float32, the dtype the module computes "
                                                  "in: the analysed sample is the one the module sees")
    # a float32 sample, or a float64 module: nothing to round, nothing said
    assert _exact(from_torch(module, X.astype(np.float32)).X) == seen
    assert "sample_rounding" not in from_torch(module, X.astype(np.float32)).provenance
    case64 = from_torch(module.double(), X)
    assert _exact(case64.X) == [[Fraction(float(v)) for v in row] for row in X]
    assert "sample_rounding" not in case64.provenance


@pytest.mark.parametrize("build", [_mlp, lambda: nn.Sequential(nn.Linear(3, 4), nn.LeakyReLU(), nn.Linear(4, 2))],
                         ids=["mlp", "layer-graph"])
def test_an_onnx_model_with_a_float32_input_is_analysed_on_the_float32_sample(tmp_path, build):
    pytest.importorskip("onnx")
    module = build().eval()
    torch.onnx.export(module, (torch.zeros(2, 3),), str(tmp_path / "m.onnx"), dynamo=False, input_names=["x"],
                      dynamic_axes={"x": {0: "n"}})
    np.save(tmp_path / "X.npy", X)  # float64
    case = import_model(tmp_path / "m.onnx", tmp_path / "X.npy")
    assert _exact(case.X) == [[Fraction(float(v)) for v in row] for row in X.astype(np.float32)]
    assert case.provenance["sample_rounding"] == ("float64 sample rounded to float32, the dtype the model computes "
                                                  "in: the analysed sample is the one the model sees")
    # a CSV of decimals is analysed exactly as written, and the provenance says why it was not rounded
    np.savetxt(tmp_path / "X.csv", X[:3], delimiter=",", fmt="%.3f")
    case = import_model(tmp_path / "m.onnx", tmp_path / "X.csv")
    assert _exact(case.X)[0][0] == Fraction(f"{X[0][0]:.3f}")
    assert case.provenance["sample_rounding"].startswith("not rounded: the sample (decimal) is analysed exactly as "
                                                         "given; the model computes in float32")


def test_a_state_dict_checked_against_its_float32_module_is_analysed_on_what_the_module_sees(tmp_path):
    module = _mlp()
    torch.save(module.state_dict(), tmp_path / "m.pt")
    case = import_model(tmp_path / "m.pt", X, reference=module)
    assert _exact(case.X) == [[Fraction(float(v)) for v in row] for row in X.astype(np.float32)]
    assert case.provenance["sample_rounding"].startswith("float64 sample rounded to float32")
    # the user's statement alone says nothing about a compute dtype: the sample is analysed as given
    case = import_model(tmp_path / "m.pt", X, assume_relu_mlp=True)
    assert _exact(case.X) == [[Fraction(float(v)) for v in row] for row in X]
    assert "sample_rounding" not in case.provenance
