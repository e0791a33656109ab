"""Generated from :mod:`kvmath.derive` by :mod:`kvmath.codegen` (``scripts/generate_numeric.py``):
never edited by hand; a test checks both files are current.
"""
