"""One scenario for every command: each option declared once (:mod:`~kvmath.scenario.options`:
its flag, kind and bounds, help, default, the commands that take it, and the field of the
scenario record it sets), the record built from those declarations
(:mod:`~kvmath.scenario.record`: :class:`~kvmath.scenario.record.Scenario`, the rows a scenario
names and every option's value, which the logic of :mod:`kvmath.logic` reads), built from a
command's parsed options in one place (:mod:`~kvmath.scenario.build`:
:func:`~kvmath.scenario.build.scenario_of`, the rows resolved), scenario files read from TOML
(:mod:`~kvmath.scenario.read`) and an engine's own offload settings
(:mod:`~kvmath.scenario.engine_config`: vLLM, LMCache and SGLang configurations).
"""
