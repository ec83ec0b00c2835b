"""PyTorch files as people save them: weight-only files are an assumed architecture unless checked against a
reference; training checkpoints found by key; TorchScript and whole pickled modules refused with what to save.

Right values: the networks that are *not* a plain ReLU chain (leaky ReLU, a residual block, layers registered
in another order than used) give outputs that differ from the chain's by far more than rounding, which the
forward check must catch; the reference outputs are computed here by PyTorch itself.  Every refusal is one
line on stderr, exit 2, with no ANSI escape and no third-party warning.
"""

from __future__ import annotations

import numpy as np
import pytest
from _importers import bad_input_error as _err

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the tests' own torch exports
nn = torch.nn
F = torch.nn.functional

from exactident import CaseFormatError, check, from_torch, import_model  # noqa: E402
from exactident.cli import main  # noqa: E402


class _Leaky(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 6), nn.Linear(6, 2)

    def forward(self, x):
        return self.fc2(F.leaky_relu(self.fc1(x), 0.2))


class _Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(4, 6), nn.Linear(6, 6), nn.Linear(6, 2)

    def forward(self, x):
        h = F.relu(self.fc1(x))
        return self.fc3(h + F.relu(self.fc2(h)))


class _Reordered(nn.Module):
    def __init__(self):
        super().__init__()
        self.b, self.a, self.out = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 2)  # registered b, a

    def forward(self, x):
        return self.out(F.relu(self.b(F.relu(self.a(x)))))  # used a, b


def _files(tmp_path, module, seed=0):
    torch.manual_seed(seed)
    module = module.eval()
    X = np.random.default_rng(seed).standard_normal((12, 4))
    with torch.no_grad():
        Y = module(torch.tensor(X, dtype=torch.float32)).numpy()
    torch.save(module.state_dict(), tmp_path / "m.pt")
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "Y.npy", Y)
    return str(tmp_path / "m.pt"), str(tmp_path / "X.npy"), str(tmp_path / "Y.npy")


GUESS = ("architecture: a weights file holds no architecture (a leaky-ReLU or residual network saves the "
         "same tensors as a plain ReLU MLP), and no verdict is given on a guess: import the model itself (its ONNX "
         "export; from_torch(module, X) in Python), check it against the model with --reference (an .onnx export "
         "or its outputs on the sample as .npy; reference=module or outputs in Python), or state that it is a "
         "plain Linear→ReLU chain with --assume-relu-mlp (assume_relu_mlp=True in Python)")


@pytest.mark.parametrize("cls", [_Leaky, _Residual, _Reordered])
def test_wrong_architecture_said_or_refused(tmp_path, capsys, cls):
    torch.manual_seed(1)
    module = cls()
    pt, X, Y = _files(tmp_path, module)
    # neither a reference nor the user's statement: no verdict on the guessed chain, one line, exit 2,
    # from every command that reads model files and from the library
    for argv in (["check", pt, "--sample", X], ["import", pt, "--sample", X], ["explain", pt, "--sample", X],
                 ["fdim", pt, "--sample", X], ["design", pt, "--sample", X], ["crosscheck", pt, "--sample", X],
                 ["canonical", pt, "--sample", X], ["equiv", pt, pt, "--sample", X], ["audit", pt, "--queries", X]):
        assert _err(capsys, argv).strip() == f"error: {pt}: {GUESS}", argv
    for call in (lambda: import_model(pt, X), lambda: check(pt, sample=X)):
        with pytest.raises(CaseFormatError) as info:
            call()
        assert str(info.value) == f"{pt}: {GUESS}"
    # the user's statement: analysed as the plain chain, and recorded as their assumption in the case,
    # the report and the table
    stated = "assumed by the user (--assume-relu-mlp, assume_relu_mlp=True): Linear→ReLU chain in key order; " \
             "not checked against the model"
    case = import_model(pt, X, assume_relu_mlp=True)
    assert case.provenance["architecture"] == stated
    assert check(pt, sample=X, assume_relu_mlp=True, numeric=False).extra["provenance"]["architecture"] == stated
    assert main(["check", pt, "--sample", X, "--assume-relu-mlp"]) == 0
    assert f"architecture {stated} (give --reference to check it)" in capsys.readouterr().out
    assert main(["check", pt, "--sample", X, "--json", "--no-numeric", "--assume-relu-mlp"]) == 0
    assert __import__("json").loads(capsys.readouterr().out)["provenance"]["architecture"] == stated
    # a reference (its outputs, an ONNX export, the module): a one-line error naming the sample and output
    err = _err(capsys, ["check", pt, "--sample", X, "--reference", Y])
    assert "m.pt: forward check: the imported network differs from the reference outputs Y.npy at sample " in err
    assert "the model is not the assumed Linear→ReLU chain in key order" in err
    torch.onnx.export(module, (torch.zeros(2, 4),), str(tmp_path / "m.onnx"), dynamo=False, input_names=["x"],
                      dynamic_axes={"x": {0: "n"}})
    capsys.readouterr()
    err = _err(capsys, ["import", pt, "--sample", X, "--reference", str(tmp_path / "m.onnx")])
    # the ONNX graph is read first: a leaky or residual network is named as what the weights file cannot express,
    # with the way to import it (the reordered layers are a chain whose weights differ)
    kind = {_Leaky: "a leaky ReLU", _Residual: "a residual (skip) connection"}.get(cls)
    onnx_path = str(tmp_path / "m.onnx")
    if kind:
        assert err.strip() == (f"error: {pt}: --reference: m.onnx is a network with {kind}, which a weights file "
                               "(read as a plain Linear→ReLU chain) cannot express: import the ONNX model "
                               f"(exactident check {onnx_path} --sample DATA) directly instead of this file")
        assert "unsupported topology" not in err and "node_" not in err
    else:
        assert "m.onnx: W_1 or b_1 differs" in err
    with pytest.raises(CaseFormatError) as info:
        import_model(pt, X, reference=module)
    if kind:
        assert str(info.value) == (f"{pt}: --reference: {cls.__name__} is a network with {kind}, which a weights "
                                   "file (read as a plain Linear→ReLU chain) cannot express: import the module "
                                   "(exactident.from_torch(module, X)) directly instead of this file")
    else:
        assert "_Reordered: W_1 or b_1 differs" in str(info.value)


def test_tiny_leaky_slope_needs_a_model_reference(tmp_path, capsys):
    """A leaky ReLU of slope 1e-6 changes the outputs by less than the float32 rounding bound, so reference
    *outputs* cannot refuse it (the architecture field says so); a model as reference is read as a graph."""
    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(4, 6), nn.Linear(6, 2)

        def forward(self, x):
            return self.fc2(F.leaky_relu(self.fc1(x), 1e-6))

    torch.manual_seed(3)
    module = Tiny()
    pt, X, Y = _files(tmp_path, module)
    case = import_model(pt, X, reference=np.load(Y))
    assert "outputs alone cannot tell a ReLU from a leaky ReLU" in case.provenance["architecture"]
    with pytest.raises(CaseFormatError, match="Tiny is a network with a leaky ReLU"):
        import_model(pt, X, reference=module)
    torch.onnx.export(module, (torch.zeros(2, 4),), str(tmp_path / "m.onnx"), dynamo=False, input_names=["x"],
                      dynamic_axes={"x": {0: "n"}})
    assert "m.onnx is a network with a leaky ReLU" in _err(capsys, ["check", pt, "--sample", X, "--reference",
                                                                    str(tmp_path / "m.onnx")])


def test_plain_chain_checked_against_each_reference(tmp_path, capsys):
    torch.manual_seed(2)
    module = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2), nn.Softmax(dim=1))
    torch.save(module.state_dict(), tmp_path / "m.pt")
    X = np.random.default_rng(0).standard_normal((12, 4))
    np.save(tmp_path / "X.npy", X)
    with torch.no_grad():
        np.save(tmp_path / "Y.npy", module[:-1](torch.tensor(X, dtype=torch.float32)).numpy())  # the logits
    for ref, how in ((str(tmp_path / "Y.npy"), "its outputs checked against the reference outputs within the "
                                               "rounding bound (outputs alone cannot tell"),
                     (module, "checked against the reference's graph (same layers and weights) and by the forward "
                              "check")):
        case = import_model(tmp_path / "m.pt", tmp_path / "X.npy", reference=ref)
        assert case.provenance["architecture"].startswith("Linear→ReLU chain in key order, " + how)
        assert "within the rounding bound" in case.provenance["forward_check"]
    assert main(["check", str(tmp_path / "m.pt"), "--sample", str(tmp_path / "X.npy"), "--reference",
                 str(tmp_path / "Y.npy")]) == 0
    out = capsys.readouterr().out
    assert "architecture" not in out  # checked: nothing to warn about
    # --reference with only case files; reference outputs without their sample, or of another shape
    from exactident.io.case import write_case

    write_case(import_model(tmp_path / "m.pt", tmp_path / "X.npy", reference=module), tmp_path / "c.json")
    assert "c.json: --reference: case files hold their network already" in _err(
        capsys, ["check", str(tmp_path / "c.json"), "--reference", str(tmp_path / "Y.npy")])
    with pytest.raises(CaseFormatError, match=r"--reference: reference outputs need the sample"):
        import_model(tmp_path / "m.pt", reference=str(tmp_path / "Y.npy"))
    with pytest.raises(CaseFormatError, match=r"forward check: the reference outputs X.npy gives outputs of shape "
                                              r"\(12, 4\), the imported network \(12, 2\)"):
        import_model(tmp_path / "m.pt", tmp_path / "X.npy", reference=str(tmp_path / "X.npy"))


def test_npz_and_safetensors_need_the_statement(tmp_path):
    np.savez(tmp_path / "m.npz", W1=np.ones((3, 2)), b1=np.zeros(3), W2=np.ones((1, 3)))
    with pytest.raises(CaseFormatError, match=r"m.npz: architecture: a weights file holds no architecture"):
        import_model(tmp_path / "m.npz", np.zeros((1, 2)))
    case = import_model(tmp_path / "m.npz", np.zeros((1, 2)), assume_relu_mlp=True)
    assert case.provenance["architecture"].startswith("assumed by the user (--assume-relu-mlp, assume_relu_mlp=True)"
                                                      ": Linear→ReLU chain W1, b1, W2, b2, ... in index order")
    st = pytest.importorskip("safetensors.numpy")
    st.save_file({"a.weight": np.ones((3, 2), dtype=np.float32)}, tmp_path / "m.safetensors")
    with pytest.raises(CaseFormatError, match=r"m.safetensors: architecture: a weights file holds no architecture"):
        import_model(tmp_path / "m.safetensors", np.zeros((1, 2)))
    case = import_model(tmp_path / "m.safetensors", np.zeros((1, 2)), assume_relu_mlp=True)
    assert case.provenance["architecture"].startswith("assumed by the user (--assume-relu-mlp, assume_relu_mlp=True)"
                                                      ": Linear→ReLU chain in natural key order")


@pytest.mark.parametrize("layout", ["model_state_dict", "state_dict", "model"])
def test_tutorial_checkpoints_found_by_key(tmp_path, layout):
    torch.manual_seed(3)
    module = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    opt = torch.optim.Adam(module.parameters())
    ckpt = {"epoch": 5, layout: module.state_dict(), "optimizer_state_dict": opt.state_dict(),
            "loss": torch.tensor(0.25)}
    torch.save(ckpt, tmp_path / "ck.pt")
    X = np.random.default_rng(0).standard_normal((5, 3))
    case = import_model(tmp_path / "ck.pt", X, reference=module)
    assert case.widths == (3, 4, 1) and "within the rounding bound" in case.provenance["forward_check"]


def test_checkpoint_without_a_state_dict_lists_its_keys(tmp_path, capsys):
    torch.save({"epoch": 5, "weights": {"w": 3}, "note": "x"}, tmp_path / "ck.pt")
    err = _err(capsys, ["import", str(tmp_path / "ck.pt")])
    assert "ck.pt: no state dict found: the keys are 'epoch', 'weights', 'note' (expected tensors named " \
           "<layer>.weight / <layer>.bias, or a checkpoint holding them under model_state_dict, state_dict, model)" \
           in err


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        return self.fc(x)


def test_torchscript_and_whole_module_refused_cleanly(tmp_path, capfd):
    torch.jit.save(torch.jit.script(_Net()), str(tmp_path / "ts.pt"))
    torch.save(_Net(), tmp_path / "whole.pt")
    capfd.readouterr()
    for name, message in [("ts.pt", "a TorchScript archive (torch.jit.save) holds code and is not read; save "
                                    "model.state_dict() with torch.save"),
                          ("whole.pt", "a whole pickled module of class test_import_torch_checks._Net "
                                       "(torch.save(model)) is refused, never unpickled; save model.state_dict()")]:
        code = main(["import", str(tmp_path / name)])
        _, err = capfd.readouterr()
        assert code == 2 and message in err, err
        assert len(err.strip().splitlines()) == 1 and "\x1b" not in err and "Warning" not in err, err
        assert err.rstrip().endswith("or export the model to ONNX"), err  # never cut mid-sentence


def test_from_torch_records_its_forward_check():
    torch.manual_seed(4)
    net = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Dropout(0.5), nn.Linear(5, 2), nn.Softmax(dim=1)).train()
    case = from_torch(net, np.random.default_rng(0).standard_normal((6, 3)))
    assert case.provenance["forward_check"].startswith("torch forward of Sequential on 6 rows: max |difference|")
    assert net.training  # the module's mode is restored after the check ran it in eval mode
    assert "architecture" not in case.provenance


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_reference_with_a_sigmoid_inside_is_refused_for_the_sigmoid(tmp_path, capsys):
    """The plain readers used to stop at the first Linear after a Sigmoid ("follows the output activation
    sigmoid"): the refusal names the Sigmoid itself, and the layer after it, for an ONNX reference, a module
    reference and the module imported directly."""
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Sigmoid(), torch.nn.Linear(4, 2)).eval()
    torch.save(module.state_dict(), tmp_path / "m.pt")
    np.save(tmp_path / "X.npy", np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32))
    torch.onnx.export(module, (torch.zeros(2, 3),), str(tmp_path / "m.onnx"), dynamo=False)
    err = _err(capsys, ["check", str(tmp_path / "m.pt"), "--sample", str(tmp_path / "X.npy"), "--reference",
                        str(tmp_path / "m.onnx")])
    assert "m.onnx: node '/1/Sigmoid' (Sigmoid): not piecewise linear inside the network" in err, err
    assert "(Gemm) follows it" in err, err
    for call in (lambda: import_model(tmp_path / "m.pt", tmp_path / "X.npy", reference=module),
                 lambda: from_torch(module, np.zeros((2, 3)))):
        with pytest.raises(CaseFormatError, match=r"1 \(Sigmoid\): not piecewise linear inside the network"):
            call()
