"""Layer 4, numbers from the generated code on the tables: the deployment and path values
(values), the reload-versus-recompute comparison (compare), prefill, serving, the reuse
condition and node plan (reuse), bands (bands), the engine-cost fit (engine_fit, calibrate),
validation against measurements, and what changed between releases (changes).
"""
