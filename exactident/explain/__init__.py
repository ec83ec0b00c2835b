"""Explain a verdict and design the sample (``exactident explain``, ``exactident design``).

Per parameter, what the sample determines (:mod:`exactident.explain.parameters`);
per hidden neuron, the data it sees (:mod:`exactident.explain.neurons`); an exact,
readable basis of ``ker Gamma`` (:mod:`exactident.explain.kernel`); which samples
already identify theta and which new points would (:mod:`exactident.explain.design`).
docs/explain.md states what each classification proves.

The subpackage is also callable: ``exactident.explain(case)`` is :func:`exactident.api.explain`.
"""
