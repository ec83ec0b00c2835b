"""Flax linen and NNX MLPs, imported from their parameters and forward-checked against ``model.apply``.

Right values: every imported weight equals the Flax kernel's transpose (float32 read exactly with
``Fraction``); the outputs compared are Flax's own (``model.apply``), computed by JAX.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from _importers import rows_of

from exactident import CaseFormatError, from_flax

X = np.random.default_rng(2).standard_normal((7, 3))


def _exact_t(a):
    return [[Fraction(float(v)) for v in row] for row in np.asarray(a).T]


@pytest.fixture(scope="module")
def linen():
    jax = pytest.importorskip("jax")
    nn = pytest.importorskip("flax.linen")  # (imports flax's nnx too, for the NNX test)

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x):
            for width in (5, 4, 4, 4, 4, 4, 4, 4, 4, 4):  # 11 Dense layers: Dense_10 comes after Dense_9
                x = nn.relu(nn.Dense(width)(x))
            return nn.Dense(2)(x)

    model = MLP()
    return jax, model, model.init(jax.random.PRNGKey(0), np.ones((1, 3), np.float32))


def test_linen_mlp_forward_checked_against_apply(linen):
    _, model, variables = linen
    case = from_flax(variables, X, reference=lambda x: model.apply(variables, x))
    p = variables["params"]
    assert case.widths == (3, 5) + (4,) * 9 + (2,)
    for l in range(11):
        assert rows_of(case.network.W[l]) == _exact_t(p[f"Dense_{l}"]["kernel"]), f"W_{l + 1}"
    prov = case.provenance
    assert prov["format"] == "flax" and prov["weight_dtype"] == "float32"
    assert prov["forward_check"].startswith("the reference function on 7 rows") and "within" in prov["forward_check"]
    assert prov["parameter_names"]["W_11"] == "params/Dense_10/kernel[j,i]"
    # outputs computed beforehand work too (on the sample as given)
    outputs = np.asarray(model.apply(variables, X.astype(np.float32)))
    assert "within" in from_flax(variables["params"], X.astype(np.float32), reference=outputs).provenance[
        "forward_check"]


def test_linen_without_reference_needs_the_users_statement(linen):
    _, _, variables = linen
    with pytest.raises(CaseFormatError, match=r"<flax params>: architecture: a parameter tree holds no architecture"):
        from_flax(variables, X)
    case = from_flax(variables, X, assume_relu_mlp=True)
    assert case.provenance["forward_check"].startswith("not run: no reference outputs given; architecture assumed "
                                                       "by the user (assume_relu_mlp=True)")
    assert "architecture assumed" in case.description


def test_wrong_order_caught_by_the_forward_check(linen):
    """Given a wrong layer order (or a model that is not the assumed chain), the reference refuses it."""
    _, model, variables = linen
    mixed = ["Dense_0", "Dense_1", "Dense_3", "Dense_2"] + [f"Dense_{l}" for l in range(4, 11)]  # same shapes
    with pytest.raises(CaseFormatError, match=r"forward check: the imported network differs from the reference "
                                              r"function at sample \d+, output \d+"):
        from_flax(variables, X, reference=lambda x: model.apply(variables, x), layers=mixed)


def test_nnx_module_and_state():
    pytest.importorskip("jax")
    nnx = pytest.importorskip("flax.nnx")

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.layers = nnx.List([nnx.Linear(3, 6, rngs=rngs), nnx.Linear(6, 2, rngs=rngs)])

        def __call__(self, x):
            return self.layers[1](nnx.relu(self.layers[0](x)))

    model = MLP(nnx.Rngs(1))
    for params in (model, nnx.state(model, nnx.Param)):
        case = from_flax(params, X, reference=model)
        assert rows_of(case.network.W[1]) == _exact_t(model.layers[1].kernel[...])
        assert "within" in case.provenance["forward_check"]
        assert case.provenance["parameter_names"]["b_2"] == "layers/1/bias[i]"


def test_refusals():
    pytest.importorskip("jax")
    k = np.ones((3, 2), np.float32)
    with pytest.raises(CaseFormatError, match=r"batch_stats: a variable collection other than params"):
        from_flax({"params": {"Dense_0": {"kernel": k}}, "batch_stats": {}})
    with pytest.raises(CaseFormatError, match=r"params/BatchNorm_0/scale: only Dense layers"):
        from_flax({"params": {"Dense_0": {"kernel": k}, "BatchNorm_0": {"scale": np.ones(2)}}})
    named = {"params": {"hidden": {"kernel": k}, "out": {"kernel": np.ones((2, 1), np.float32)}}}
    with pytest.raises(CaseFormatError, match=r"cannot tell the layer order from the names .*layers=\[...\]"):
        from_flax(named)
    assert from_flax(named, layers=["hidden", "out"], assume_relu_mlp=True).widths == (3, 2, 1)
    with pytest.raises(CaseFormatError, match=r"reference outputs need the sample X"):
        from_flax(named, reference=np.ones((1, 1)), layers=["hidden", "out"])
    with pytest.raises(CaseFormatError, match=r"expected a Flax parameter tree"):
        from_flax([k])


def test_nested_call_creation_order():
    """nn.Dense(2)(nn.relu(nn.Dense(4)(x))) creates the outer Dense first: Dense_0 is the output layer. Name
    order does not chain (a one-line error saying why); layers= gives the applied order, forward-checked."""
    jax = pytest.importorskip("jax")
    nn = pytest.importorskip("flax.linen")

    class Nested(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(2)(nn.relu(nn.Dense(4)(x)))

    model = Nested()
    variables = model.init(jax.random.PRNGKey(1), np.ones((1, 3), np.float32))
    assert variables["params"]["Dense_0"]["kernel"].shape == (4, 2)  # the outer layer
    with pytest.raises(CaseFormatError, match=r"params/Dense_1/kernel: shape \(3, 4\) does not follow "
                                              r"params/Dense_0/kernel .* creation order"):
        from_flax(variables, X, assume_relu_mlp=True)
    case = from_flax(variables, X, reference=lambda x: model.apply(variables, x), layers=["Dense_1", "Dense_0"])
    assert case.widths == (3, 4, 2) and "within" in case.provenance["forward_check"]


def test_parameter_names_round_trip_through_the_case_file(tmp_path):
    """A plain dict of numpy arrays needs no jax; the names survive writing and reading the case, and a
    non-string name is an error naming the key."""
    import json

    from exactident import load_case, write_case

    params = {"Dense_0": {"kernel": np.array([[1.0, 2.0]], np.float32), "bias": np.zeros(2, np.float32)},
              "Dense_1": {"kernel": np.array([[3.0], [4.0]], np.float32)}}
    with pytest.raises(CaseFormatError, match=r"<flax params>: architecture: .*give reference= .*, or state that it "
                                              r"is a plain Dense→ReLU chain with assume_relu_mlp=True$"):
        from_flax(params, [[0.5]])
    case = from_flax(params, [[0.5]], assume_relu_mlp=True)
    # kernel (in, out) = (1, 2): W_1 = kernel.T, so W_1[i,j] is kernel[j,i]: W_1[1,0] is kernel[0,1] = 2
    assert case.provenance["parameter_names"] == {"W_1": "Dense_0/kernel[j,i]", "b_1": "Dense_0/bias[i]",
                                                  "W_2": "Dense_1/kernel[j,i]"}
    assert case.network.W[0][1, 0] == 2
    write_case(case, tmp_path / "c.json")
    assert load_case(tmp_path / "c.json").provenance["parameter_names"] == case.provenance["parameter_names"]
    obj = json.loads((tmp_path / "c.json").read_text())
    obj["provenance"]["parameter_names"]["W_1"] = 3
    (tmp_path / "bad.json").write_text(json.dumps(obj))
    with pytest.raises(CaseFormatError, match=r"provenance.parameter_names.W_1: expected a string"):
        load_case(tmp_path / "bad.json")
