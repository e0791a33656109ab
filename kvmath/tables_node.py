"""NVMe drives, plan defaults and nodes given as files (CSV rows in the bundled format).

``drives.csv``: one row per drive model, rated bandwidths (B/s, sequential, SI), rated
endurance (drive writes per day over the warranty) and sources. ``plan_defaults.csv``:
the defaults of a tier plan (HBM utilisation, activation reserve, running batch), each
labelled config or assumption.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated as A

from .schema import DataError, FieldError, Pos, PosInt, Source, Text, load_table
from .tables import bundled, data_path, load_nodes, load_prices, nodes, single

DAYS_PER_YEAR = 365.25


@dataclass(frozen=True)
class Drive:
    name: A[str, Text]
    description: A[str, Text]
    capacity_bytes: A[float, Pos]
    read_Bps: A[float, Pos]  #: sequential read, B/s
    write_Bps: A[float, Pos]  #: sequential write, B/s
    drive_writes_per_day: A[float, Pos]  #: rated endurance, full-capacity writes per day
    warranty_years: A[float, Pos]  #: years the endurance rating covers
    pcie_gen: A[int, PosInt]
    source: Source

    @property
    def lifetime_drive_writes(self):
        """Full-capacity writes over the rated life (DWPD x days of the warranty)."""
        return self.drive_writes_per_day * DAYS_PER_YEAR * self.warranty_years


def load_drives(path):
    return load_table(path, Drive)


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
    try:
        if node.drive and node.drive not in drives():
            raise FieldError("drive", f"unknown drive {node.drive!r}; bundled: "
                             f"{', '.join(sorted(drives()))}")
        if node.drive and node.nvme_drive_bytes != drives()[node.drive].capacity_bytes:
            raise FieldError("nvme_drive_bytes", f"expected the capacity of drive {node.drive!r} "
                             f"({drives()[node.drive].capacity_bytes:g}), got {node.nvme_drive_bytes:g}")
    except FieldError as exc:
        raise DataError(path, index, exc.field, str(exc)) from None
    return node


@lru_cache(maxsize=None)
def checked_nodes():
    """The bundled nodes, each drive cross-checked against drives.csv."""
    return {name: _check_drive(data_path("nodes.csv"), i, n)
            for i, (name, n) in enumerate(nodes().items(), start=1)}


def resolve_node(name_or_path):
    """A bundled node by name, or the single row of a nodes CSV file in the bundled format."""
    cat = bundled()
    return _check_drive(name_or_path, 1, single(name_or_path, checked_nodes(), lambda p: load_nodes(
        p, set(cat.gpus), set(cat.links)), "node"))


def node_for_gpu(gpu_name):
    """The first bundled node whose GPU is gpu_name, or None."""
    return next((n for n in checked_nodes().values() if n.gpu == gpu_name), None)


def node_drive(node):
    """The node's Drive, or None when the node names none."""
    return drives()[node.drive] if node.drive else None
