"""Layer 3, the sourced data: the table schema (schema, from kvmath/data/datapackage.json) and
the typed rows of every bundled and user table (rows). A new tier, GPU, node or engine is a row
of kvmath/data/*.csv, with its source.
"""
# every row type is declared (kvmath.tables.rows) before any table is read through the schema,
# whichever module a caller imports first
from kvmath.tables import rows  # noqa: F401,E402
