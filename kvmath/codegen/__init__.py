"""Layer 2, code generated from the derivations: the catalogue of expressions printed to numpy
(catalogue, numpy_printer) and the calculator's JavaScript formulas (javascript). They write
:mod:`kvmath._generated`; ``scripts/generate_numeric.py`` runs them.
"""
