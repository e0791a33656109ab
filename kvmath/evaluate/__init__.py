"""Numbers for Python callers, over the logic of :mod:`kvmath.logic`: the one face of the
scenario logic (:mod:`~kvmath.evaluate.api`: a scenario by names and fields, its values, paths,
comparisons, crossings and sweeps), the evidence behind the bands and the band itself
(:mod:`~kvmath.evaluate.bands`), the calibrated prefill (:mod:`~kvmath.evaluate.prefill`),
serving overlaps (:mod:`~kvmath.evaluate.serving`), prices and the reuse condition of one
conversation (:mod:`~kvmath.evaluate.reuse`), validation against published measurements
(:mod:`~kvmath.evaluate.validation`), the engine-cost fit (:mod:`~kvmath.evaluate.engine_fit`),
GPU calibration (:mod:`~kvmath.evaluate.calibrate`) and what changed between releases
(:mod:`~kvmath.evaluate.changes`). The node's plan is :mod:`kvmath.node`.
"""
