"""Layer 5, one scenario for every command: each option declared once (options), read from flags
or a TOML file (read) or an engine's own offload settings (engine_config), held in one record
whose fields the declarations give (record), and built from a command's parsed options in one
place (build: :func:`kvmath.scenario.build.scenario_of`, the rows resolved).
"""
