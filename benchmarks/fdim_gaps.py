"""Benchmark: what the unsettled dimensions of the hidden-symmetry survey are made of.

Usage (from the repository root)::

    python benchmarks/fdim_gaps.py --depth 4 --width 5 --trials 10

For each trial of the survey's cell (:mod:`exactident.symmetry.glr`, same seeds and architecture
``(w, w x (d - 1), 1)``), runs ``exactident fdim`` as the survey does and, when ``lower < upper``,
counts the parameters whose column of ``J`` vanishes at every point of the lower bound's sample
(mod its prime): weights never seen there, the candidates of the ``unseen`` mechanism.  Prints
``upper_if_unseen``, the upper bound those unit directions would give with the rescalings if they
were proved on all of ``R^n`` (exact rank over Q; at most the proved ``upper``): it is at least
``lower`` (the directions are in the kernel of ``J`` at the sample), and where it equals ``lower``,
the whole gap is made of such candidates, i.e. of proofs missing on the upper side, not of samples
missing on the lower side.
"""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main() -> None:
    import flint
    import numpy as np

    from exactident.model.activation import activation_state
    from exactident.model.fixed_edges import FixedEdges
    from exactident.model.gamma_modular import gamma_mod_p
    from exactident.model.integer_forward import data_denominator
    from exactident.symmetry import hidden
    from exactident.symmetry.fdim import functional_dimension
    from exactident.symmetry.glr import gaussian_batch, paper_architecture, torch_default_network

    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--width", type=int, default=5)
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--walk-seconds", type=float, default=60.0)
    args = ap.parse_args()
    widths = list(paper_architecture(args.depth, args.width))
    explained = unsettled = 0
    for t in range(args.trials):
        rng = np.random.default_rng([0, widths[0], len(widths) - 2, widths[1], t])
        net = torch_default_network(widths, rng)
        X = gaussian_batch(widths[0], net.dim + 10, rng)
        r = functional_dimension(net, X, seed=0, search=False, max_boxes=256, lines=4096,
                                 walk_seconds=args.walk_seconds)
        if r.lower == r.upper:
            print(f"trial {t}: settled at {r.lower} (dim {r.dim})", flush=True)
            continue
        unsettled += 1
        st = activation_state(net, r.points)
        J = gamma_mod_p(net, r.points, st.pattern, FixedEdges({}), r.prime, data_denominator(net, r.points))
        zero = [c for c in range(J.shape[1]) if not J[:, c].any()]
        upper_if = net.dim - hidden.kernel_dimension(net, [{c: flint.fmpq(1)} for c in zero])
        upper_if = min(upper_if, r.upper)
        explained += upper_if == r.lower
        print(f"trial {t}: [{r.lower}, {r.upper}] (dim {r.dim}); {len(zero)} parameter(s) unseen at the sample; "
              f"upper_if_unseen {upper_if}", flush=True)
    print(f"{widths}: {unsettled} unsettled, {explained} of them closed by the unseen candidates")


if __name__ == "__main__":
    main()
