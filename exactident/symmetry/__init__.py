"""Symmetries of ReLU networks, exactly: canonical forms, orbit equality, extraction audits (docs/symmetries.md).

- :mod:`exactident.symmetry.group`: the group acting on any network's parameters (positive rescalings,
  permutations of hidden neurons and of interchangeable blocks such as convolution channels);
- :mod:`exactident.symmetry.canonical`: the canonical representative of the orbit, for any network;
- :mod:`exactident.symmetry.equiv`: are two networks in the same orbit; where they differ, and their
  outputs on a sample; :mod:`exactident.symmetry.alignment`: the exact error after alignment;
- :mod:`exactident.symmetry.audit`: identifiability of a victim (any network) from an attack's queries;
- :mod:`exactident.symmetry.command`: ``exactident canonical``, ``equiv`` and ``audit``; their output:
  :mod:`exactident.symmetry.views`;
- :mod:`exactident.symmetry.fdim`, :mod:`~exactident.symmetry.hidden`, :mod:`~exactident.symmetry.conditional`:
  the functional dimension, certified both ways (a plain MLP or a layer graph, one path), and the mechanisms of
  hidden symmetries; :mod:`~exactident.symmetry.fdim_result`: the result and its JSON object;
- :mod:`exactident.symmetry.jacobian`: any network in the compiled layered form, with the Jacobian it ranks;
- :mod:`exactident.symmetry.linewalk`: samples reaching every activation region random lines cross, kept by
  exact rank gain (the lower bound of the functional dimension);
- :mod:`exactident.symmetry.regions`, :mod:`~exactident.symmetry.region_lp`,
  :mod:`~exactident.symmetry.region_fdim`: the exact cover of the domain by activation regions, and the
  functional dimension it settles;
- :mod:`exactident.symmetry.glr`: the Grigsby-Lindsey-Rolnick survey of hidden symmetries;
- :mod:`exactident.symmetry.fdim_command`, :mod:`~exactident.symmetry.glr_command`: ``exactident fdim`` and
  ``hidden-symmetries``.
"""
