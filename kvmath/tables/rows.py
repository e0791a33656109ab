"""The bundled tables, and the catalogue assembled from them.

Fields, units, constraints and keys are declared once, in the data package
(``kvmath/data/datapackage.json``); a class here adds only what a schema cannot say: rules
across fields (``check``) and derived properties."""
from __future__ import annotations

import contextlib
import contextvars
import os
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from pathlib import Path

from kvmath.errors import InputError
from kvmath.tables.copies import CopyPath, copy_paths  # noqa: F401 (the copy paths' rows)
from kvmath.tables.families import family
from kvmath.tables.schema import DataError, FieldError, Row, UnknownName, data_path, package, read, resource, table

from kvmath.tiers.build import kind_tiers, tiers_of
from kvmath.tiers.records import GPU_HOST_LINK, GPU_HOST_MEMORY


def _need(row, when, names, what):
    """When ``when`` holds, each of ``names`` must have a value."""
    for name in (n for n in names if when and getattr(row, n) in (None, "")):
        raise FieldError(name, f"missing value (expected {what})")


def _at_most(row, name, limit):
    if getattr(row, name) > getattr(row, limit):
        raise FieldError(name, f"expected at most {limit} ({getattr(row, limit)})")


#: the gpus.csv field holding a GPU's dense peak in each compute dtype (--compute-dtype)
PEAK_FIELDS = {"bf16": "bf16_dense_flops", "fp8": "fp8_dense_flops", "nvfp4": "fp4_dense_flops"}
#: the kind of a row that describes an announced part: refused unless asked for (--allow-projection)
PROJECTION = "projection"


def row_location(table_name, name):
    """(path, row) of a bundled row by its name (row 1 = first data row); (None, None) when the
    name is not bundled (a user's own file)."""
    names = list(table(table_name))
    if name not in names:
        return None, None
    return data_path(resource(table_name)["path"]), names.index(name) + 1


def _where(table_name, name):
    path, row = row_location(table_name, name)
    return f"{path}, row {row}" if path else f"{resource(table_name)['title']} row {name!r}"


class Gpu(Row, table="gpus"):
    """A GPU (gpus.csv); its peak in a compute dtype is kvmath.logic.dense_flops (the
    gpus.csv field of each dtype: :data:`PEAK_FIELDS`)."""

    def check(self):
        links = table("links")
        for f in ("host_link", "host_memory_link"):
            link = links.get(getattr(self, f))
            if link is not None and link.kind == PROJECTION and self.kind != PROJECTION:
                raise FieldError("kind", f"expected {PROJECTION}: its {f} {link.name} is a "
                                 f"projection, so the GPU cannot be {self.kind}")


class Link(Row, table="links"):
    efficiency: float | None = None  #: achieved fraction of bandwidth_Bps (efficiencies.csv)
    duplex_retained: float = 1.0  #: fraction of that left while the reverse direction is busy
    placement_retained: float = 1.0  #: fraction left when the reader sits across a PCIe switch


class Efficiency(Row, table="efficiencies"):
    value: float = float("nan")  #: measured/peak, capped at 1

    def check(self):
        _need(self, not self.same_as, ("measured_value", "peak_value"), "a positive number")


class TierRow(Row, table="tiers"):
    def check(self):
        from kvmath.tiers.kinds import KINDS
        if self.kind and self.kind not in KINDS:
            raise FieldError("kind", f"unknown tier kind {self.kind!r}; expected one of "
                             f"{', '.join(KINDS)} (kvmath/tiers/kinds/)")
        if self.hop not in (GPU_HOST_LINK, GPU_HOST_MEMORY, *table("links")):
            raise FieldError("hop", f"unknown link {self.hop!r}; expected one of "
                             f"{', '.join(sorted(table('links')))}, {GPU_HOST_LINK} or {GPU_HOST_MEMORY}")
        for name in (n for n in self.gpu_names if n not in table("gpus")):
            raise FieldError("gpus", f"unknown GPU {name!r}; expected names of gpus.csv "
                             f"separated by ; ({', '.join(sorted(table('gpus')))}) or empty "
                             "(every GPU)")

    @property
    def gpu_names(self):
        return tuple(n.strip() for n in (self.gpus or "").split(";") if n.strip())


class Model(Row, table="models"):
    def check(self):
        fam = family(self.attention)  # the schema's enum holds the registry's names (a test checks)
        _need(self, True, fam.required, f"a value for attention {self.attention}")
        if fam.divides:
            part, whole = fam.divides
            if getattr(self, whole) % getattr(self, part):
                raise FieldError(part, f"{whole} ({getattr(self, whole)}) must be divisible by "
                                 f"{part} ({getattr(self, part)})")
        _at_most(self, "window_layers", "layers")
        _at_most(self, "dense_layers", "layers")
        if self.window_layers + self.chunk_layers + self.recurrent_layers > self.layers:
            raise FieldError("recurrent_layers", f"window_layers ({self.window_layers}), "
                             f"chunk_layers ({self.chunk_layers}) and recurrent_layers "
                             f"({self.recurrent_layers}) exceed layers ({self.layers})")
        _need(self, self.chunk_layers, ("chunk_tokens",), "tokens when chunk_layers > 0")
        if self.aux_kv_dtype and self.aux_kv_dtype not in table("dtypes"):
            raise FieldError("aux_kv_dtype", f"unknown format {self.aux_kv_dtype!r}; expected one "
                             f"of {', '.join(sorted(table('dtypes')))} or empty")
        if self.aux_kv_dtype and not fam.aux:
            raise FieldError("aux_kv_dtype", f"expected empty: attention {self.attention} caches "
                             "nothing beside its KV")
        if fam.aux is False and (self.index_n_heads or self.index_head_dim or self.index_topk):
            raise FieldError("index_n_heads", f"expected empty: attention {self.attention} has no "
                             "indexer (index_* fields belong to attention dsa)")
        _need(self, self.recurrent_layers, ("recurrent_key_heads", "recurrent_value_heads",
                                            "recurrent_key_head_dim", "recurrent_value_head_dim",
                                            "recurrent_conv_kernel"),
              "a positive integer when recurrent_layers > 0 (a hybrid model's recurrent layers)")
        if self.recurrent_layers and self.recurrent_value_heads % self.recurrent_key_heads:
            raise FieldError("recurrent_value_heads", f"expected a multiple of recurrent_key_heads "
                             f"({self.recurrent_key_heads}): each key head serves a whole number "
                             f"of value heads, got {self.recurrent_value_heads}")
        if self.state_dtype and self.state_dtype not in table("dtypes"):
            raise FieldError("state_dtype", f"unknown format {self.state_dtype!r}; expected one of "
                             f"{', '.join(sorted(table('dtypes')))} or empty (the weights')")
        _need(self, self.window_layers, ("window",), "tokens when window_layers > 0")
        _need(self, self.dense_layers, ("intermediate_size",), "a positive integer when dense_layers > 0")
        _need(self, self.dense_layers < self.layers, ("moe_intermediate_size", "num_experts", "experts_per_token"),
              "a positive integer when dense_layers < layers (MoE layers)")
        if self.dense_layers < self.layers:
            _at_most(self, "experts_per_token", "num_experts")

    @property
    def is_moe(self):
        return bool(self.num_experts)

    @property
    def attention_kind(self):
        """The name its attention family gives it: MHA, GQA or MQA (by KV heads against query
        heads), MLA, ..."""
        return family(self.attention).kind(self.num_attention_heads, self.num_key_value_heads)


class Node(Row, table="nodes"):
    def check(self):
        drive = table("drives").get(self.drive)
        if drive and self.nvme_drive_bytes != drive.capacity_bytes:
            raise FieldError("nvme_drive_bytes", f"expected the capacity of drive {self.drive!r} "
                             f"({drive.capacity_bytes:g}), got {self.nvme_drive_bytes:g}")
        for what, row in (("gpu", table("gpus").get(self.gpu)), ("drive", drive),
                          ("nvme_drive_link", table("links").get(self.nvme_drive_link))):
            if row is not None and row.kind == PROJECTION and self.kind != PROJECTION:
                raise FieldError("kind", f"expected {PROJECTION}: its {what} {row.name} is a "
                                 f"projection, so the node cannot be {self.kind}")


class Pool(Row, table="pools"):
    """A KV store shared by GPU nodes (pools.csv): its servers' media and NICs, the engine's
    read path to it, and how many copies it keeps."""

    def check(self):
        links = table("links")
        for f in ("media_link", "nic_link", "client_link"):
            if getattr(self, f) not in links:
                raise FieldError(f, f"unknown link {getattr(self, f)!r}; expected one of "
                                 f"{', '.join(sorted(links))}")
        if self.on_gpu_nodes and self.storage_nodes != self.gpu_nodes:
            raise FieldError("storage_nodes", f"a pool of the GPU nodes' own DRAM has one server "
                             f"per GPU node: expected {self.gpu_nodes}, got {self.storage_nodes}")

    def servers(self, nodes=None):
        """Servers of the pool when ``nodes`` GPU nodes share it: its own, or, for a pool of the
        GPU nodes' own DRAM, one per GPU node."""
        return (nodes or self.gpu_nodes) if self.on_gpu_nodes else self.storage_nodes

    def capacity(self, nodes=None):
        """KV the whole pool holds, B: its servers' media over the copies it keeps of each."""
        return self.servers(nodes) * self.storage_node_bytes / self.replicas

    @property
    def capacity_bytes(self):
        """KV the pool holds as its row deploys it, B."""
        return self.capacity()


class Dtype(Row, table="dtypes"):
    def check(self):
        if self.scale_bits == 0 and self.block_elements != 1:
            raise FieldError("block_elements", "expected 1 for a format without block scales "
                             "(scale_bits 0)")

    @property
    def bytes_per_element(self):
        """Bytes one element occupies, its share of its block's scale included
        (kvmath.derive.kv.dtype_bytes), at the listed block size, B."""
        return self.bytes_at(self.block_elements)

    def bytes_at(self, block_elements):
        """The same with blocks of block_elements (a head's width where block_is_head), B."""
        from kvmath._generated.numeric import FUNCS
        f, args = FUNCS["derive.dtype_bytes"]
        at = {"n_bits": self.element_bits, "s_bits": self.scale_bits, "g_s": block_elements}
        return float(f(*[at[a] for a in args]))


class Codec(Row, table="codecs"):
    pass


class RopeScaling(Row, table="rope_scaling"):
    pass


class Drive(Row, table="drives"):
    @property
    def lifetime_drive_writes(self):
        """Full-capacity writes over the rated life (DWPD x 365.25 days x years of the warranty)."""
        return self.drive_writes_per_day * 365.25 * self.warranty_years


class Pause(Row, table="pauses"):
    def check(self):
        _need(self, self.distribution == "lognormal", ("sigma",), "a positive number for lognormal")


class Engine(Row, table="engines"):
    #: which end of its copy path's measured spread the engine's copies run at (copy_paths.csv):
    #: "nominal", or the band's "fast" and "slow" ends
    copy_end: str = "nominal"

    def check(self):
        if (self.storage_io_bytes is None) != (self.queue_depth is None):
            raise FieldError("queue_depth", "give storage_io_bytes and queue_depth together")
        if self.layer_overlap and self.request_steps < 1:
            raise FieldError("layer_overlap", "a load can hide only under a step the engine runs: "
                             "layer_overlap needs request_steps of at least 1")


class EngineCost(Row, table="engine_costs"):
    def check(self):
        unit = {"request_fixed_s": "s", "held_out_reload_factor": "1"}.get(self.parameter, "s/token")
        if self.unit != unit:
            raise FieldError("unit", f"expected {unit} for {self.parameter}, got {self.unit!r}")
        if self.kind == "fit" and not self.calibration_rows:
            raise FieldError("calibration_rows", "a fitted value names the rows it was fitted on")

    @property
    def engine_names(self):
        return tuple(e.strip() for e in self.engines.split(";") if e.strip())


#: the engine costs a request pays (engine_costs.csv parameters), in the order TTFT adds them
ENGINE_COST_PARAMETERS = ("request_fixed_s", "hash_token_s", "tokenize_token_s", "hit_token_s")


@lru_cache(maxsize=None)
def engine_costs(name):
    """{parameter: EngineCost row} of an engine profile (engine_costs.csv); a parameter no row
    gives is absent (uncharged: the engine's costs are not calibrated)."""
    out = {}
    for row in table("engine_costs").values():
        if name in row.engine_names:
            if row.parameter in out:
                raise DataError(data_path("engine_costs.csv"), None, "engines",
                                f"{row.parameter} given twice for engine {name!r}")
            out[row.parameter] = row
    return out


class PlanDefault(Row, table="plan_defaults"):
    def check(self):
        if self.name in ("gpu_memory_utilization", "activation_reserve_fraction") and not 0 < self.value <= 1:
            raise FieldError("value", f"{self.name}: expected a fraction in (0, 1]")


class EngineSetting(Row, table="engine_settings"):
    """A setting of an engine's own offload configuration, with its default (value, in unit,
    for the node or per GPU rank; empty: required or none) and where it is defined."""


#: what one unit of an engine setting is in kvmath's units (B, tokens, a ratio)
SETTING_UNITS = {"B": 1.0, "GB": 1e9, "GiB": 2.0 ** 30, "tokens": 1.0, "ratio": 1.0,
                 "boolean": 1.0, "": 1.0}


#: the fitted parameters of the calibrated prefill model, each GPU's in prefill_fit.csv
PREFILL_PARAMETERS = ("eta_g", "m_half", "t_kern", "eta_norm", "eta_rope", "eta_act", "eta_add",
                      "t_kng", "eta_a", "T_a")


@lru_cache(maxsize=None)
def fitted_parameters(path=None):
    """{gpu: {parameter: value}} from prefill_fit.csv; DataError on a bad or missing value."""
    path = path or data_path("prefill_fit.csv")
    out = {}
    for r in read(FitRow, path).values():
        out.setdefault(r.gpu, {})[r.parameter] = r.value
    for gpu, params in out.items():
        missing = [p for p in PREFILL_PARAMETERS if p not in params]
        if missing:
            raise DataError(path, None, "parameter", f"GPU {gpu!r} lacks {', '.join(missing)}")
    return out


@lru_cache(maxsize=None)
def allreduce_figures(path=None):
    """{gpu: (all-reduce busbw B/s, latency s, all-to-all B/s, latency s)} from allreduce.csv
    (a GPU without an all-to-all figure: its all-reduce's, an assumption)."""
    rows = read(Row.types["allreduce"], path)
    return {g: (r.busbw_Bps, r.latency_s,
                r.a2a_busbw_Bps if r.a2a_busbw_Bps is not None else r.busbw_Bps,
                r.a2a_latency_s if r.a2a_latency_s is not None else r.latency_s)
            for g, r in rows.items()}


@lru_cache(maxsize=None)
def moe_fits():
    """{gpu: {kernels: {dtype: {layout: {eta_moe, m_half_moe, n_half_moe, t_moe}}}}} from
    moe_fit.csv."""
    out = {}
    for (gpu, kernels, dtype, layout), r in table("moe_fit").items():
        out.setdefault(gpu, {}).setdefault(kernels, {}).setdefault(dtype, {})[layout] = {
            "eta_moe": r.eta_moe, "m_half_moe": r.m_half_moe, "n_half_moe": r.n_half_moe,
            "t_moe": r.t_moe}
    return out


class FitRow(Row, table="prefill_fit"):
    def check(self):  # the efficiencies (eta_*) are fractions; the rest may be 0
        if self.parameter.startswith("eta_") and not 0 < self.value <= 1:
            raise FieldError("value", f"expected a fraction in (0, 1] for {self.parameter}, got {self.value}")


class Measurement(Row, table="validation"):
    def check(self):
        if self.model and self.model not in table("models") and not validation_model_path(self.model).exists():
            raise FieldError("model", f"unknown model {self.model!r} (neither bundled nor in "
                             "kvmath/data/validation_models/)")
        _need(self, True, {"ttft_s": ("model", "gpu", "tp", "tokens"), "prefill_s": ("model", "gpu", "tp", "tokens"),
                           "kv_bytes": ("model", "tokens"), "bandwidth_Bps": ("link", "count"),
                           "ttft_recompute_s": ("model", "gpu", "tp", "tokens", "engine"),
                           "decode_step_s": ("model", "gpu", "tp", "tokens"),
                           "ttft_reload_s": ("model", "gpu", "tp", "tokens", "tier", "engine")}[self.quantity],
              f"a value for quantity {self.quantity}")
        if self.kv_dtype and self.kv_dtype not in table("dtypes"):
            raise FieldError("kv_dtype", f"unknown KV format {self.kv_dtype!r}; expected one of "
                             f"{', '.join(sorted(table('dtypes')))} or empty (the model row's)")
        for f, name in (("gpu", "gpus"), ("link", "links")):  # a measurement of a real part
            row = table(name).get(getattr(self, f))
            if row is not None and row.kind == PROJECTION:
                raise FieldError(f, f"{row.name} is a projection (an announced part): a "
                                 "measurement names a part that was measured")


class FleetMeasurement(Row, table="fleet_validation"):  # kvmath.fleet.validation reads them
    def check(self):
        if self.metric == "token_hit_rate" and self.measured_value > 1:
            raise FieldError("measured_value", "a hit rate is a fraction in (0, 1]")


def validation_model_path(name):
    """Models measured in published work but not bundled live in data/validation_models/."""
    return data_path("validation_models") / f"{name}.csv"


# every other table: a plain row type, named for pickling (TransferCurves, Prices, ...)
for _r in (r for r in package() if r not in Row.types):
    _name = "".join(w.title() for w in _r.split("_"))
    globals()[_name] = type(_name, (Row,), {"__module__": __name__, "__qualname__": _name}, table=_r)

CURVE_FIELDS = tuple(f["name"] for f in resource("transfer_curves")["schema"]["fields"])
#: the bundled tables by name: plan_defaults() is {name: row}, and so on
drives, prices, pauses, thresholds, engines, deployments, plan_defaults, nodes, gpu_prices = (
    partial(table, n) for n in ("drives", "prices", "pauses", "thresholds", "engines", "deployments",
                                "plan_defaults", "nodes", "gpu_prices"))
engine_settings = partial(table, "engine_settings")
pools = partial(table, "pools")


def efficiencies_of(path=None):
    """Efficiencies by (item, quantity), ``value`` = measured/peak capped at 1; a same_as row
    takes its item's value."""
    rows = read(Efficiency, path)
    out = {k: replace(e, value=min(1.0, e.measured_value / e.peak_value)) for k, e in rows.items() if not e.same_as}
    for i, (k, e) in enumerate(rows.items(), start=1):
        if e.same_as and (e.same_as, e.quantity) not in out:
            raise DataError(path or data_path("efficiencies.csv"), i, "same_as",
                            f"no measured {e.quantity} efficiency for {e.same_as!r}")
        if e.same_as:
            out[k] = replace(e, value=out[(e.same_as, e.quantity)].value)
    return {k: out[k] for k in rows}


def _with_efficiency(gpu, eff, path=None, row=None):
    """The GPU with its prefill and HBM efficiencies (its own columns, else efficiencies.csv)."""
    for q in (q for q in ("prefill", "hbm") if getattr(gpu, f"{q}_efficiency") is None):
        if (gpu.name, q) not in eff:
            raise DataError(path or data_path("gpus.csv"), row, f"{q}_efficiency", f"no {q} efficiency for "
                            f"GPU {gpu.name!r}: add a {q}_efficiency column (0 < value <= 1)")
        gpu = replace(gpu, **{f"{q}_efficiency": eff[(gpu.name, q)].value})
    return gpu


@dataclass(frozen=True)
class Catalogue:
    gpus: dict
    links: dict
    tiers: dict
    models: dict
    efficiencies: dict


@lru_cache(maxsize=None)
def bundled():
    """The catalogue shipped with the package, validated and cross-checked."""
    eff = efficiencies_of()
    for name in (n for n in table("links") if (n, "link") not in eff):
        raise DataError(data_path("efficiencies.csv"), None, "item", f"no link efficiency row for link {name!r}")
    links = {n: replace(link, efficiency=eff[(n, "link")].value,
                        duplex_retained=eff[(n, "duplex")].value if (n, "duplex") in eff else 1.0,
                        placement_retained=(eff[(n, "placement")].value
                                            if (n, "placement") in eff else 1.0))
             for n, link in table("links").items()}
    gpus = {n: _with_efficiency(g, eff, row=i) for i, (n, g) in enumerate(table("gpus").items(), start=1)}
    return Catalogue(gpus, links, {**tiers_of(read(TierRow)), **kind_tiers()}, table("models"),
                     eff)


def resolve(cls, name_or_path, what=None):
    """A bundled row by name, or the single row of a CSV file in the same format."""
    items = table(cls.table)
    if name_or_path in items:
        return items[name_or_path]
    if Path(name_or_path).suffix == ".csv" or os.path.exists(name_or_path):  # never raises
        got = read(cls, name_or_path)
        if len(got) != 1:
            raise DataError(name_or_path, None, None, f"expected exactly one row, found {len(got)}")
        return next(iter(got.values()))
    raise UnknownName(f"unknown {what or resource(cls.table)['title']} {name_or_path!r}; "
                   f"bundled: {', '.join(sorted(items))}")


class ProjectionError(DataError):
    """A row of kind projection (an announced part) asked for as if measured."""


#: the projection rows this context may use: None refuses them (the default, so a name a user
#: gives never reaches an announced part unasked); a list allows them and records each used,
#: so the output says so (kvmath.cli.output). Commands set it from --allow-projection
#: (kvmath.scenario.read.read_scenario); the book's what-ifs use :func:`projections_allowed`.
_PROJECTIONS = contextvars.ContextVar("kvmath_projections", default=None)


def allow_projections(allow):
    """Refuse projection rows (False) or allow them and record those used (True), in this context."""
    _PROJECTIONS.set([] if allow else None)


@contextlib.contextmanager
def projections_allowed():
    """Allow projection rows inside the block; yields the list of those used."""
    token = _PROJECTIONS.set([])
    try:
        yield _PROJECTIONS.get()
    finally:
        _PROJECTIONS.reset(token)


def projections_used():
    """The projection rows used since they were allowed, as 'what name (file)' strings."""
    return list(_PROJECTIONS.get() or ())


def _projection(table_name, row, path=None, index=None):
    """Refuse (ProjectionError naming the file, row and field) or record a projection row."""
    if row is None or getattr(row, "kind", None) != PROJECTION:
        return
    title = resource(table_name)["title"]
    used = _PROJECTIONS.get()
    if used is None:
        if path is None:
            path, index = row_location(table_name, row.name)
        raise ProjectionError(path, index, "kind", f"{title} {row.name} is a projection (an "
                              "announced part: neither measured nor on a shipping part's "
                              "datasheet); expected a measured or datasheet row, or pass "
                              "--allow-projection to evaluate it as a what-if")
    entry = f"{title} {row.name} ({Path(path).name if path else resource(table_name)['path']})"
    if entry not in used:
        used.append(entry)


def _gpu_projections(gpu, path=None):
    _projection("gpus", table("gpus").get(gpu.name, gpu) if path is None else gpu, path,
                1 if path else None)
    for name in (gpu.host_link, gpu.host_memory_link):
        _projection("links", table("links").get(name))


def tier_projections(tier):
    """Refuse (or record) the projection links a tier's own hops name."""
    for hop in tier.hops:
        _projection("links", table("links").get(hop.link))


def resolve_gpu(name_or_path):
    """A bundled GPU by name, or the single GPU in a CSV file in the bundled format; a
    projection (it or its links) is refused unless allowed."""
    cat = bundled()
    if name_or_path in cat.gpus:
        gpu = cat.gpus[name_or_path]
        _gpu_projections(gpu)
        return gpu
    gpu = _with_efficiency(resolve(Gpu, name_or_path), cat.efficiencies, name_or_path, 1)
    _gpu_projections(gpu, name_or_path)
    return gpu


def resolve_node(name_or_path):
    """A bundled node by name, or the single node of a CSV file; a projection (it, its GPU, its
    drive or drive link) is refused unless allowed."""
    node = resolve(Node, name_or_path)
    user = name_or_path not in table("nodes")
    _projection("nodes", node, name_or_path if user else None, 1 if user else None)
    gpu = table("gpus").get(node.gpu)
    if gpu is not None:
        _gpu_projections(gpu)
    _projection("drives", table("drives").get(node.drive))
    _projection("links", table("links").get(node.nvme_drive_link))
    return node


def resolve_pool(name_or_path):
    """A bundled pool by name, or the single pool of a CSV file; its links are checked for
    projections."""
    pool = resolve(Pool, name_or_path)
    for name in (pool.media_link, pool.nic_link, pool.client_link):
        _projection("links", table("links").get(name))
    return pool


resolve_model, resolve_engine = (partial(resolve, c) for c in (Model, Engine))
resolve_pause = partial(resolve, Pause, what="pause distribution")
resolve_codec = partial(resolve, Codec, what="KV codec")


def resolve_tier(name):
    if name not in bundled().tiers:
        raise UnknownName(f"unknown tier {name!r}; bundled: {', '.join(sorted(bundled().tiers))}")
    tier = bundled().tiers[name]
    tier_projections(tier)
    return tier


def transfer_curves(path=None):
    """Measured bandwidth against transfer size, grouped by curve name."""
    curves = {}
    for p in read(Row.types["transfer_curves"], path) if path else table("transfer_curves"):
        curves.setdefault(p.curve, []).append(p)
    return curves


def node_for_gpu(gpu_name):
    """The first bundled node whose GPU is gpu_name, or None."""
    return next((n for n in nodes().values() if n.gpu == gpu_name), None)


def node_drive(node):
    """The node's Drive, or None when the node names none."""
    return drives()[node.drive] if node.drive else None


def model_of(name):
    """A bundled model, or a validation-only one (kvmath/data/validation_models: a model the
    measurements name that the catalogue does not bundle, e.g. llama-3.3-70b)."""
    cat = bundled()
    return cat.models[name] if name in cat.models else resolve_model(str(validation_model_path(name)))


#: bytes per element of each number format (dtypes.csv), its block scales included
DTYPE_BYTES = {d.name: d.bytes_per_element for d in table("dtypes").values()}


def codecs():
    """The bundled KV codecs (codecs.csv) by name."""
    return table("codecs")


def rope_scalings():
    """The RoPE scaling each model card states (rope_scaling.csv), by (model, method)."""
    return table("rope_scaling")
