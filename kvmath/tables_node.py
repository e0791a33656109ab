"""NVMe drives, plan defaults and nodes given as files (CSV rows in the bundled format).

``drives.csv``: one row per drive model, rated bandwidths (B/s, sequential, SI), rated
endurance (drive writes per day over the warranty) and sources. ``plan_defaults.csv``:
the defaults of a tier plan (HBM utilisation, activation reserve, running batch), each
labelled config or assumption.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .tables import (DataError, Source, _read, _source, _unique, bundled, data_path, load_nodes,
                     load_prices, nodes)

DAYS_PER_YEAR = 365.25


@dataclass(frozen=True)
class Drive:
    name: str
    description: str
    capacity_bytes: float
    read_Bps: float  #: sequential read, B/s
    write_Bps: float  #: sequential write, B/s
    drive_writes_per_day: float  #: rated endurance, full-capacity writes per day
    warranty_years: float  #: years the endurance rating covers
    pcie_gen: int
    source: Source

    @property
    def lifetime_drive_writes(self):
        """Full-capacity writes over the rated life (DWPD x days of the warranty)."""
        return self.drive_writes_per_day * DAYS_PER_YEAR * self.warranty_years


DRIVE_FIELDS = ("name", "description", "capacity_bytes", "read_Bps", "write_Bps",
                "drive_writes_per_day", "warranty_years", "pcie_gen", "kind", "source",
                "source_location", "retrieved", "verified_via", "notes")


def load_drives(path):
    rows = _read(path, DRIVE_FIELDS)
    items = [Drive(name=r.text("name"), description=r.text("description"),
                   capacity_bytes=r.number("capacity_bytes"), read_Bps=r.number("read_Bps"),
                   write_Bps=r.number("write_Bps"),
                   drive_writes_per_day=r.number("drive_writes_per_day"),
                   warranty_years=r.number("warranty_years"), pcie_gen=r.integer("pcie_gen"),
                   source=_source(r)) for r in rows]
    return _unique(rows, items)


@lru_cache(maxsize=None)
def drives():
    return load_drives(data_path("drives.csv"))


@lru_cache(maxsize=None)
def plan_defaults():
    """Defaults of a tier plan by name: gpu_memory_utilization, activation_reserve_fraction,
    batch_seqs (Price records: value and source)."""
    items = load_prices(data_path("plan_defaults.csv"))
    for name in ("gpu_memory_utilization", "activation_reserve_fraction"):
        if not 0 < items[name].value <= 1:
            raise DataError(data_path("plan_defaults.csv"), None, "value",
                            f"{name}: expected a fraction in (0, 1]")
    return items


def _check_drive(path, index, node):
    if node.drive and node.drive not in drives():
        raise DataError(path, index, "drive", f"unknown drive {node.drive!r}; bundled: "
                        f"{', '.join(sorted(drives()))}")
    if node.drive and node.nvme_drive_bytes != drives()[node.drive].capacity_bytes:
        raise DataError(path, index, "nvme_drive_bytes", f"expected the capacity of drive "
                        f"{node.drive!r} ({drives()[node.drive].capacity_bytes:g}), got "
                        f"{node.nvme_drive_bytes:g}")
    return node


@lru_cache(maxsize=None)
def checked_nodes():
    """The bundled nodes, each drive cross-checked against drives.csv."""
    return {name: _check_drive(data_path("nodes.csv"), i, n)
            for i, (name, n) in enumerate(nodes().items(), start=1)}


def resolve_node(name_or_path):
    """A bundled node by name, or the single row of a nodes CSV file in the bundled format."""
    items = checked_nodes()
    if name_or_path in items:
        return items[name_or_path]
    if Path(name_or_path).suffix == ".csv" or Path(name_or_path).exists():
        cat = bundled()
        loaded = load_nodes(name_or_path, set(cat.gpus), set(cat.links))
        if len(loaded) != 1:
            raise DataError(name_or_path, None, None, f"expected exactly one row, found {len(loaded)}")
        return _check_drive(name_or_path, 1, next(iter(loaded.values())))
    raise KeyError(f"unknown node {name_or_path!r}; bundled: {', '.join(sorted(items))}")


def node_for_gpu(gpu_name):
    """The first bundled node whose GPU is gpu_name, or None."""
    return next((n for n in checked_nodes().values() if n.gpu == gpu_name), None)


def node_drive(node):
    """The node's Drive, or None when the node names none."""
    return drives()[node.drive] if node.drive else None
