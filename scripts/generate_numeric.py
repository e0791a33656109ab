"""Regenerate kvmath/_generated/ from the SymPy derivations (:mod:`kvmath.codegen.numpy_printer`).

Run after changing kvmath/derive/*.py: ``python scripts/generate_numeric.py``.
"""
from kvmath.codegen.numpy_printer import main

if __name__ == "__main__":
    main()
