"""Layer 5, one scenario for every command: each option declared once (options), read from flags
or a TOML file (read) or an engine's own offload settings (engine_config).
"""
