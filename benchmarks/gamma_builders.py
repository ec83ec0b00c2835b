"""Time the exact ``Gamma`` builders (Q and mod p) against an earlier revision, in one run.

Usage (from the repository root; needs scikit-learn and git)::

    python benchmarks/gamma_builders.py [--rev d263ab4] [--repeat 5]

Loads ``exactident/model/gamma.py`` and ``gamma_modular.py`` as they were at ``--rev`` (three
separate builders) beside the checkout's (one builder, :mod:`exactident.model.backprop`), checks
that both give the same matrix, and prints the best of ``--repeat`` alternating CPU times
(``process_time``: robust to a loaded machine) of ``gamma_exact`` and ``gamma_mod_p`` on
digits-size MLPs (scikit-learn ``MLPClassifier`` on standardised digits, imported exactly with
``from_sklearn``) and the shipped MLP cases.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the checkout's exactident, installed or not


def _old_module(rev: str, path: str, name: str) -> types.ModuleType:
    src = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:{path}"], check=True, capture_output=True,
                         text=True).stdout
    mod = types.ModuleType(name)
    mod.__file__ = f"{rev}:{path}"
    sys.modules[name] = mod
    exec(compile(src, mod.__file__, "exec"), mod.__dict__)
    return mod


def _digits(hidden: tuple[int, ...], n: int):
    import warnings

    from sklearn import datasets
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier
    from sklearn.preprocessing import StandardScaler

    from exactident import from_sklearn

    X, y = datasets.load_digits(return_X_y=True)
    X, y = X[:n], y[:n]
    X = StandardScaler().fit_transform(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = MLPClassifier(hidden, activation="relu", max_iter=300, random_state=0).fit(X, y)
    return from_sklearn(model, X, name=f"digits-{'-'.join(map(str, [64, *hidden, 10]))}-n{n}")


def _best(fn, args: tuple, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        fn(*args)
        best = min(best, time.process_time() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", default="d263ab4")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    from exactident.io.case import load_case
    from exactident.linalg.modular import random_primes
    from exactident.model.activation import activation_state
    from exactident.model.fixed_edges import fixed_edges
    from exactident.model.gamma import gamma_exact
    from exactident.model.gamma_modular import ModularData, gamma_mod_p
    from exactident.model.integer_forward import data_denominator

    old_gamma = _old_module(args.rev, "exactident/model/gamma.py", "_old_gamma")
    old_modular = _old_module(args.rev, "exactident/model/gamma_modular.py", "_old_gamma_modular")

    cases = [_digits((16,), 300), _digits((32, 16), 300)]
    cases += [load_case(os.path.join(ROOT, "cases", f"{name}.json"))
              for name in ("wine-mlp-13-8-3", "iris-mlp-4-8-8-3", "diabetes-mlp-10-8-1")]
    print("| case | shape | exact old (s) | exact new (s) | ratio | mod p old (s) | mod p new (s) | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for case in cases:
        net, X = case.network, case.X
        st = activation_state(net, X)
        fixed = fixed_edges(net)
        avoid = data_denominator(net, X)
        p = random_primes(1, avoid, random.Random(1))[0]
        old_data, new_data = old_modular.ModularData(net, X), ModularData(net, X)
        G_old = old_gamma.gamma_exact(net, X, st.Z, st.pattern, fixed)
        G_new = gamma_exact(net, X, st.Z, st.pattern, fixed)
        assert G_old == G_new, case.name
        P_old = old_modular.gamma_mod_p(net, X, st.pattern, fixed, p, avoid, old_data)
        P_new = gamma_mod_p(net, X, st.pattern, fixed, p, avoid, new_data)
        assert (P_old == P_new).all(), case.name
        calls = {"eo": (old_gamma.gamma_exact, (net, X, st.Z, st.pattern, fixed), 1),
                 "en": (gamma_exact, (net, X, st.Z, st.pattern, fixed), 1),
                 "mo": (old_modular.gamma_mod_p, (net, X, st.pattern, fixed, p, avoid, old_data), 3),
                 "mn": (gamma_mod_p, (net, X, st.pattern, fixed, p, avoid, new_data), 3)}
        times = dict.fromkeys(calls, float("inf"))
        for _ in range(args.repeat):  # alternate old and new: the machine's load hits both alike
            for key, (fn, fn_args, inner) in calls.items():
                times[key] = min(times[key], _best(fn, fn_args, inner))
        print(f"| {case.name} | {G_new.nrows()} x {G_new.ncols()} | {times['eo']:.3f} | {times['en']:.3f} | "
              f"{times['en'] / times['eo']:.2f} | {times['mo']:.4f} | {times['mn']:.4f} | "
              f"{times['mn'] / times['mo']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
