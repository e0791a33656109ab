"""The scenario's logic, written once for the command line and the calculator.

Which layout serves a model, which hops a tier's bytes cross and at what rate under an engine
profile, every value a comparison substitutes, the prefill model in use, the crossings, the
comparison itself, its bands and the reuse condition: one module per concern, each taking the
scenario record (:class:`kvmath.scenario.record.Scenario`, the rows it names and its options,
declared once in :mod:`kvmath.scenario.options`) and what varies (the prompt's tokens, a load).

Written in the portable subset of Python that :mod:`kvmath.codegen.pyjs` prints as JavaScript:
the command line runs these modules and the book's calculator runs their printed copy
(``kvmath/_generated/kvcalc_logic.js``, one bundle of the modules in :data:`MODULES` order), so
the two cannot drift. They call only the primitives of :mod:`kvmath.logic.runtime` (catalogued
formulas, records, the tables as ``DATA``) and each other, and answer in plain numbers, lists
and dicts. Python callers use the face of :mod:`kvmath.evaluate.api` (names resolved, arrays,
results remembered).

* :mod:`~kvmath.logic.runtime`: the primitives (Python here; ``kvcalc_runtime.js`` in the page);
* :mod:`~kvmath.logic.constants`: the defaults and constants, each stated once;
* :mod:`~kvmath.logic.rules`: small rules of models, GPUs and engine profiles;
* :mod:`~kvmath.logic.layout`: the model's values and its layout on the GPUs;
* :mod:`~kvmath.logic.path`: a tier on a node, its hops and their rates;
* :mod:`~kvmath.logic.values`: every substitution value of a scenario at a load;
* :mod:`~kvmath.logic.prefill`: the prefill model in use and the engine's own step;
* :mod:`~kvmath.logic.crossings`: where reload and recompute cross;
* :mod:`~kvmath.logic.comparison`: the comparison at one prompt length;
* :mod:`~kvmath.logic.bands`: its band, within physics;
* :mod:`~kvmath.logic.reuse`: whether an offload pays.

Importing this package loads none of them (the command line loads what it needs).
"""

#: the portable modules, each after those it imports (the printer's order)
MODULES = ("constants", "rules", "layout", "path", "values", "prefill", "crossings",
           "comparison", "bands", "reuse")
