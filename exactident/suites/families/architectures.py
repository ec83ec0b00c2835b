"""Families of small random networks beyond the plain ReLU MLP, written as ``exactident-case/2`` layer graphs:
``residual-mlp``, ``leaky-mlp``, ``prelu-mlp``, ``conv1d-pool``.

The ground truth is *certified*: a draw is kept only when the constrained engine decides it
(``identifiable`` by ``rank Gamma_free = dim_free`` on every tie resolution, or ``not-identifiable``
by a certificate: dead units, constant units, a submersion, an entering submersion or a straight line), and the
family's check runs ``verify-certificate``'s independent verifier
(:func:`exactident.verify.certificate.verify_certificate`: its own forward pass, ``Gamma_free`` mod
primes and ``S_H``) on that report.  Cases of even index aim at ``identifiable`` (a sample of
``2 ceil(k / N_L) + 2`` points for ``k`` free parameters), odd ones at ``not-identifiable`` (about
half as many points); ``--n-samples`` takes whichever decided verdict comes.

``widths`` means, per family: ``residual-mlp`` ``[d, h, m]`` (``x -> relu(fc2(relu(fc1 x)) + x)
-> head``, ``fc1: d -> h``, ``fc2: h -> d``, ``head: d -> m``); ``leaky-mlp`` and ``prelu-mlp`` the
widths of the MLP (leaky ReLU with PyTorch's default slope, the exact value of float32 0.01; one
PReLU slope per unit); ``conv1d-pool`` ``[length, channels, m]`` (one input channel of even
``length``, ``conv1d`` to ``channels`` with kernel 3 and zero padding 1, ReLU, average pooling
by 2, flatten, a linear layer to ``m`` outputs).

Called through :mod:`exactident.suites.families`.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from exactident.suites.draft import (
    BIAS_DENS,
    BIAS_NUM,
    SAMPLE_DENS,
    SAMPLE_NUM,
    WEIGHT_DENS,
    WEIGHT_NUM,
    Draft,
    fstr,
)
from exactident.suites.families.common import Family, Unmet
from exactident.suites.rng import HashRng

__all__ = ["ATTEMPTS", "FAMILIES", "LEAKY_SLOPE"]

#: Draws tried per case (each one runs the engine: about 20 ms on the small widths of the tests).
ATTEMPTS = 400
#: The negative slope of ``leaky-mlp``: the exact binary value of float32 0.01 (PyTorch's default).
LEAKY_SLOPE = "5368709/536870912"
#: The verdicts a case of these families may have (decided, with a certificate).
DECIDED = ("identifiable", "not-identifiable")


def _w(rng: HashRng) -> str:
    return fstr(rng.rational(-WEIGHT_NUM, WEIGHT_NUM, WEIGHT_DENS, nonzero=True))


def _b(rng: HashRng) -> str:
    return fstr(rng.rational(-BIAS_NUM, BIAS_NUM, BIAS_DENS))


def _linear(rng: HashRng, name: str, src: str, n_out: int, n_in: int) -> dict[str, Any]:
    return {"name": name, "op": "linear", "inputs": [src], "weight": [[_w(rng) for _ in range(n_in)]
                                                                      for _ in range(n_out)],
            "bias": [_b(rng) for _ in range(n_out)]}


def _mlp(rng: HashRng, widths: list[int], act: str) -> list[dict[str, Any]]:
    layers, src = [], "input"
    for l in range(1, len(widths)):
        layers.append(_linear(rng, f"fc{l}", src, widths[l], widths[l - 1]))
        src = f"fc{l}"
        if l < len(widths) - 1:
            a: dict[str, Any] = {"name": f"act{l}", "op": act, "inputs": [src]}
            if act == "leaky_relu":
                a["negative_slope"] = LEAKY_SLOPE
            elif act == "prelu":
                a["weight"] = [fstr(Fraction(rng.randint(1, 3), 8)) for _ in range(widths[l])]
            layers.append(a)
            src = a["name"]
    return layers


def _residual(rng: HashRng, widths: list[int]) -> list[dict[str, Any]]:
    d, h, m = widths
    return [_linear(rng, "fc1", "input", h, d), {"name": "relu1", "op": "relu", "inputs": ["fc1"]},
            _linear(rng, "fc2", "relu1", d, h), {"name": "res", "op": "add", "inputs": ["fc2", "input"]},
            {"name": "relu2", "op": "relu", "inputs": ["res"]}, _linear(rng, "head", "relu2", m, d)]


def _conv(rng: HashRng, widths: list[int]) -> list[dict[str, Any]]:
    length, channels, m = widths
    return [{"name": "conv1", "op": "conv1d", "inputs": ["input"], "out_channels": channels, "kernel_size": [3],
             "stride": [1], "padding": [1], "weight": [[[_w(rng) for _ in range(3)]] for _ in range(channels)],
             "bias": [_b(rng) for _ in range(channels)]},
            {"name": "relu1", "op": "relu", "inputs": ["conv1"]},
            {"name": "pool1", "op": "avgpool1d", "inputs": ["relu1"], "kernel_size": [2], "stride": [2],
             "padding": [0]},
            {"name": "flat", "op": "flatten", "inputs": ["pool1"]},
            _linear(rng, "fc", "flat", m, channels * length // 2)]


#: family -> (summary, layers builder, input shape, output name, number of inputs)
_SPECS: dict[str, tuple[str, Any, Any, Any]] = {
    "residual-mlp": ("residual block relu(fc2(relu(fc1 x)) + x) and a linear head; widths [d, h, m]", _residual,
                     lambda w: [w[0]], lambda w: "head"),
    "leaky-mlp": ("leaky ReLU MLP (slope: float32 0.01 exactly)", lambda r, w: _mlp(r, w, "leaky_relu"),
                  lambda w: [w[0]], lambda w: f"fc{len(w) - 1}"),
    "prelu-mlp": ("PReLU MLP, one free slope per unit", lambda r, w: _mlp(r, w, "prelu"),
                  lambda w: [w[0]], lambda w: f"fc{len(w) - 1}"),
    "conv1d-pool": ("1-D convolution (kernel 3, padding 1), ReLU, average pooling by 2, linear head; widths "
                    "[length, channels, m]", _conv, lambda w: [1, w[0]], lambda w: "fc"),
}


def _impossible(name: str):
    def why(widths: list[int]) -> str | None:
        if len(widths) < 3 or min(widths) < 1:
            return "needs at least one hidden layer (three widths or more)"
        if name in ("residual-mlp", "conv1d-pool") and len(widths) != 3:
            return "takes exactly three widths"
        if name == "conv1d-pool" and widths[0] % 2:
            return "the input length must be even (average pooling by 2)"
        return None
    return why


def _n_params(layers: list[dict[str, Any]]) -> int:
    def count(v: Any) -> int:
        return sum(count(x) for x in v) if isinstance(v, list) else 1
    return sum(count(layer.get("weight") or []) + count(layer.get("bias") or []) for layer in layers)


def _builder(name: str):
    _, make_layers, shape, output = _SPECS[name]

    def build(rng: HashRng, widths: list[int], index: int, n_samples: int | None) -> Draft:
        from exactident.check import check
        from exactident.io.case import parse_case

        target = None if n_samples is not None else DECIDED[index % 2]
        for k in range(ATTEMPTS):
            r = rng.child("attempt", k)
            layers = make_layers(r, widths)
            per = -(-_n_params(layers) // widths[-1])
            n = n_samples if n_samples is not None else (2 * per + 2 if target == "identifiable" else max(1, per // 2))
            n_in = 1
            for s in shape(widths):
                n_in *= s
            X = [[r.rational(-SAMPLE_NUM, SAMPLE_NUM, SAMPLE_DENS) for _ in range(n_in)] for _ in range(n)]
            graph = {"input_shape": shape(widths), "layers": layers, "output": output(widths)}
            d = Draft(list(widths), [], [], X, graph=graph)
            case = parse_case(_obj(d, name))
            report = check(case, numeric=False, seed=0)
            if report.verdict in DECIDED and (target is None or report.verdict == target):
                d.params.update({"target": target or "decided", "attempts": k + 1, "n_samples": n})
                d.description = (f"random {_SPECS[name][0]}: {report.verdict} ({report.decided_by}), "
                                 f"rank Gamma_free {report.rank_gamma_text}, dim_free {report.dim}")
                d.aux["report"] = report.to_dict()
                return d
        raise Unmet(f"no {name} network with a decided {target or ''} verdict in {ATTEMPTS} draws".replace("  ", " "))
    return build


def _obj(d: Draft, name: str) -> dict[str, Any]:
    from exactident.suites.draft import draft_to_case_obj

    return draft_to_case_obj(d, name)


def _verify(d: Draft) -> str | None:
    """The independent verifier on the engine's report: a decided verdict whose certificate is valid."""
    from exactident.io.case import parse_case
    from exactident.verify.certificate import verify_certificate

    report = d.aux.get("report")
    if not isinstance(report, dict) or report.get("verdict") not in DECIDED:
        return "no decided verdict"
    if d.params.get("target") in DECIDED and report["verdict"] != d.params["target"]:
        return f"verdict {report['verdict']}, not {d.params['target']}"
    case = parse_case(_obj(d, report["name"]))
    valid, msgs = verify_certificate(case, report, require_claims=True)
    return None if valid else "verify-certificate refuses the report: " + "; ".join(msgs[-3:])


def _family(name: str) -> Family:
    summary = _SPECS[name][0]
    return Family(name, summary + " (exactident-case/2)",
                  "the constrained engine decides it (identifiable: rank Gamma_free = dim_free on every tie "
                  "resolution; not-identifiable: a certificate) and verify-certificate accepts the report",
                  _builder(name), _verify, _impossible(name))


#: The families defined here (collected in ``exactident.suites.families.FAMILIES``).
#:
#: :meta hide-value:
FAMILIES = [_family(name) for name in _SPECS]
