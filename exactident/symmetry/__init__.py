"""Symmetries of ReLU networks, exactly: canonical forms, orbit equality, extraction audits (docs/symmetries.md).

- :mod:`exactident.symmetry.canonical`: the canonical representative of the orbit under positive
  rescaling and permutation of hidden neurons;
- :mod:`exactident.symmetry.equiv`: are two parameter settings in the same orbit; where they differ,
  the exact error after alignment, and their outputs on a sample;
- :mod:`exactident.symmetry.audit`: identifiability of a victim from an attack's queries;
- :mod:`exactident.symmetry.command`: ``exactident canonical``, ``equiv`` and ``audit``.
"""
