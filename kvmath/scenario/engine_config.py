"""A scenario's engine from the engine's own offload settings (``--engine-config FILE``).

Three formats, told apart by their content:

* **vLLM**: the JSON given to ``--kv-transfer-config`` (an object with ``kv_connector``), with
  vLLM's unquoted size suffixes (``80m`` decimal, ``80M`` binary: vllm/engine/arg_utils.py
  ``_expand_json_human_readable_numbers``). ``OffloadingConnector``: ``cpu_bytes_to_use``
  (bytes, the whole engine's host cache, required by vLLM: vllm/v1/kv_offload/cpu/spec.py),
  ``canonical_layout`` (replicated GQA heads stored once), ``spec_name`` and
  ``secondary_tiers`` (a ``fs`` tier is the drives; no size cap exists for it).
  ``LMCacheConnectorV1``: the LMCache settings given as ``lmcache.``-prefixed extra keys.
* **LMCache**: its YAML file (``LMCACHE_CONFIG_FILE``): ``chunk_size`` (tokens),
  ``local_cpu`` and ``max_local_cpu_size`` (GiB per GPU worker), ``local_disk`` and
  ``max_local_disk_size`` (GiB per worker; the disk tier exists only when both are set),
  ``extra_config.save_only_first_rank`` (default: the model is MLA) (lmcache/v1/config.py).
* **SGLang**: a text file of server flags (``--enable-hierarchical-cache --hicache-size 64
  ...``): ``--hicache-size`` (GB per rank) else ``--hicache-ratio`` (host pool / device pool,
  default 2), ``--hicache-io-backend`` and ``--hicache-mem-layout`` (the ``direct`` backend and
  ``page_first_direct`` layout force each other), ``--page-size`` (tokens, default 1), and
  ``--hicache-storage-backend file`` (the drives) (sglang/srt/arg_groups/fields/memory.py,
  hicache_hook.py, v0.5.23).

Defaults, units, sources and versions: ``kvmath/data/engine_settings.csv``. A setting the file holds that
kvmath does not model is named in ``not_modelled``; a setting outside its engine's types or
values is a :class:`DataError` naming the file and the setting.
"""
from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field, replace

from kvmath.errors import UsageError
from kvmath.tables.schema import regular_file
from kvmath.tables.rows import SETTING_UNITS, DataError, engine_settings, engines, resolve_engine


def default(name):
    """An engine setting's default in kvmath's units (B, tokens, a ratio): engine_settings.csv."""
    row = engine_settings()[name]
    return row.value * SETTING_UNITS[row.unit]


GIB = SETTING_UNITS["GiB"]
#: the kvmath profiles the formats map to (engines.csv)
VLLM_PROFILE = "vllm-lbhnc"
LMCACHE_PROFILE = "lmcache"
SGLANG_KERNEL, SGLANG_DIRECT = "sglang-hicache", "sglang-hicache-direct"


@dataclass(frozen=True)
class EngineConfig:
    """What an engine's settings fix in a scenario. Host and disk caches in B, per engine (one
    serving replica of TP ranks: vLLM's cpu_bytes_to_use) or per GPU rank (LMCache, SGLang);
    None: not limited by the settings, the node's whole DRAM or drives. A per-rank size where
    only rank 0 stores (``first_rank_only``: LMCache's save_only_first_rank for an MLA model) is
    one per engine. ``host_cache_hbm_ratio``: SGLang's host pool as a multiple of its device
    pool, when no size is given; ``disk_tier`` False: the engine writes no drive."""
    path: str
    format: str
    engine: object
    host_cache_bytes_per_engine: float | None = None
    host_cache_bytes_per_gpu: float | None = None
    first_rank_only: bool = False
    host_cache_hbm_ratio: float | None = None
    disk_tier: bool = False
    disk_cache_bytes: float | None = None
    disk_cache_bytes_per_gpu: float | None = None
    settings: dict = field(default_factory=dict)
    not_modelled: tuple = ()

    def size_setting(self, medium):
        """The setting that sized the engine's cache in medium (DRAM or drives), for errors."""
        names = {"vllm": ("cpu_bytes_to_use", "secondary_tiers"),
                 "lmcache": ("max_local_cpu_size", "max_local_disk_size"),
                 "vllm-lmcache": ("lmcache.max_local_cpu_size", "lmcache.max_local_disk_size"),
                 "sglang": ("--hicache-size", "--hicache-storage-backend")}[self.format]
        return names[0] if medium == "DRAM" else names[1]

    def first_rank_stores(self, model=None, tp=1, node_gpus=1) -> bool:
        """Whether rank 0 of each engine alone stores the cache for ``model`` (LMCache's
        save_only_first_rank applies to an MLA latent only: a GQA model's every rank stores its
        heads); for no model, what the settings say."""
        from kvmath.logic.rules import stores_once
        return self.first_rank_only and (model is None or
                                         stores_once(self.engine, model, tp, node_gpus))

    def summary(self, model=None) -> dict:
        """The JSON-ready record of what was read; for ``model``, ``first_rank_only`` where it
        applies to it (an MLA latent), and the settings not modelled: the first
        :data:`NAMED_NOT_MODELLED` named, all counted."""
        return {"file": self.path, "format": self.format, "engine": self.engine.name,
                "copy_tokens": self.engine.copy_tokens, "stored_once": self.engine.stored_once,
                "host_cache_bytes_per_engine": self.host_cache_bytes_per_engine,
                "host_cache_bytes_per_gpu": self.host_cache_bytes_per_gpu,
                "first_rank_only": self.first_rank_stores(model),
                "host_cache_hbm_ratio": self.host_cache_hbm_ratio, "disk_tier": self.disk_tier,
                "disk_cache_bytes": self.disk_cache_bytes,
                "disk_cache_bytes_per_gpu": self.disk_cache_bytes_per_gpu,
                "settings": dict(self.settings),
                "not_modelled": list(self.not_modelled[:NAMED_NOT_MODELLED]),
                "not_modelled_count": len(self.not_modelled)}


#: the largest engine settings file read, B: vLLM's JSON, an LMCache YAML file or SGLang's
#: flags take a few hundred bytes; a larger file is not one (a 60 MB file was read whole)
MAX_CONFIG_BYTES = 1 << 20
#: the settings kvmath does not model that its output names one by one; the rest are counted
NAMED_NOT_MODELLED = 12


def read(path) -> EngineConfig:
    """The engine settings in file ``path`` (vLLM JSON, LMCache YAML or SGLang flags)."""
    p = regular_file(path, MAX_CONFIG_BYTES, "engine's offload settings")
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(path, None, None, f"cannot read file ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise DataError(path, None, None, "not a text file (expected vLLM's --kv-transfer-config "
                        "JSON, an LMCache YAML file or SGLang's server flags)") from None
    suffix, stripped = p.suffix.lower(), text.lstrip()
    if suffix == ".json" or (suffix not in (".yaml", ".yml") and stripped.startswith("{")):
        return _vllm(str(path), _json(str(path), text))
    if suffix in (".yaml", ".yml"):
        return _lmcache_file(str(path), text)
    if stripped.startswith("--") or "--enable-hierarchical-cache" in text or "--hicache" in text:
        return _sglang(str(path), text)
    if re.search(r"^\s*[a-z_]+\s*:", text, re.M):
        return _lmcache_file(str(path), text)
    raise DataError(path, None, None, "not an engine's offload settings: expected vLLM's "
                    "--kv-transfer-config JSON (an object with kv_connector), an LMCache YAML "
                    "file, or SGLang's server flags (--enable-hierarchical-cache ...)")


# ---------------------------------------------------------------------------- a command's engine
def engine_of(args):
    """(engine row or None, EngineConfig or None): --engine-config's profile, else --engine's."""
    if args.engine_config:
        if args.engine:
            raise UsageError("--engine and --engine-config both set the engine profile: give one")
        cfg = read(args.engine_config)
        return cfg.engine, cfg
    return (resolve_engine(args.engine) if getattr(args, "engine", None) else None), None


def check_tier(cfg, tier):
    """Refuse a drive tier (a tier of a kind that wears drives) the engine's settings do not
    configure."""
    from kvmath.tiers.kinds import KINDS
    if cfg is not None and KINDS[tier.kind].wear == "drive" and not cfg.disk_tier:
        raise UsageError(f"--tier {tier.name}: the engine's settings ({cfg.path}) configure no "
                         "disk tier, so nothing is reloaded from drives")


def check_holds(cfg, tier, model, tp, node_gpus, stored_bytes):
    """Refuse a reload from host DRAM or drives whose cache the engine's own settings size below
    one stored cache of the prompt (``stored_bytes``: every rank's copy, or one where the engine
    stores once): the engine never holds the whole prompt there, so the reload compared cannot
    happen. The refusal says how much of the prompt's KV the cache holds. Per-rank sizes
    (LMCache, SGLang) hold ``tp`` ranks' shares, or rank 0's alone where it alone stores; a
    size the settings leave open (the node's whole DRAM or drives, SGLang's ratio to its device
    pool, which holds the prompt) is not checked here (the node plan caps it)."""
    from kvmath.tiers.kinds import KINDS
    kind = KINDS.get(tier.kind)
    if cfg is None or kind is None or kind.cache is None or not stored_bytes > 0:
        return
    medium = kind.cache[2]
    per_engine, per_gpu = ((cfg.host_cache_bytes_per_engine, cfg.host_cache_bytes_per_gpu)
                           if medium == "DRAM" else (None, cfg.disk_cache_bytes_per_gpu))
    ranks = 1 if cfg.first_rank_stores(model, tp, node_gpus) else tp
    capacity = per_engine if per_engine is not None else (
        None if per_gpu is None else per_gpu * ranks)
    if capacity is None or capacity >= stored_bytes:
        return
    setting = cfg.size_setting(medium)
    if medium == "DRAM" and cfg.settings.get("local_cpu") is False:
        setting = setting.replace("max_local_cpu_size", "local_cpu")
    per = "per engine" if per_engine is not None else (
        "on rank 0, which alone stores it" if ranks == 1 and tp > 1 else
        f"over its {ranks} rank(s)")
    raise UsageError(f"--tier {tier.name}: the engine's {kind.cache[1]} ({cfg.path}, field "
                     f"'{setting}') holds {_bytes(capacity)} {per}, "
                     f"{_share(capacity / stored_bytes)} of this prompt's "
                     f"{_bytes(stored_bytes)} of stored KV: the engine never holds the "
                     "whole prompt there, so the reload compared cannot happen (give a larger "
                     "cache, or fewer --tokens)")


def _bytes(x):
    """Bytes in SI units, four figures, as the output says them (kvmath.present.format's
    fmt_bytes, which this layer may not import)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if x >= scale:
            return f"{x / scale:.4g} {unit}"
    return f"{x:.4g} B"


def _share(x):
    """A share in percent, as the refusal says it (a byte of gigabytes is not "0.00%")."""
    return f"{x:.2%}" if x >= 1e-4 else "under 0.01%"


def cache_sizes(args, cfg, node, tp, model):
    """{host_cache_bytes, disk_cache_bytes, host_cache_hbm_ratio} for node_capacities, node
    totals: the flags, else the engine's settings, a per-engine size times the node's
    node.gpus / tp engines and a per-rank size times its GPUs (or its engines, where only rank 0
    of each stores: LMCache's MLA default), else None."""
    from kvmath.logic.rules import stores_once
    host, disk, ratio = (getattr(args, "host_cache_bytes", None),
                         getattr(args, "disk_cache_bytes", None), None)
    if cfg is not None:
        engines_per_node = node.gpus // tp  # whole replicas: GPUs TP cannot fill idle
        storing = engines_per_node if (cfg.first_rank_only and stores_once(
            cfg.engine, model, tp, node.gpus)) else node.gpus  # LMCache's rule has no platform
        def total(per_engine, per_gpu):
            if per_engine is not None:
                return per_engine * engines_per_node
            return None if per_gpu is None else per_gpu * storing
        if host is None:
            host = total(cfg.host_cache_bytes_per_engine, cfg.host_cache_bytes_per_gpu)
            ratio = cfg.host_cache_hbm_ratio if host is None else None
        if disk is None:
            disk = 0.0 if not cfg.disk_tier else total(None, cfg.disk_cache_bytes_per_gpu)
    # where each size came from, for node_capacities' one check against what the node holds
    def source(flag, medium):
        if getattr(args, flag.replace("-", "_"), None) is not None:
            return f"--{flag}"
        if cfg is None:
            return None
        setting = "--hicache-ratio" if medium == "DRAM" and ratio is not None \
            else cfg.size_setting(medium)
        return f"{cfg.path}, field '{setting}'"
    return {"host_cache_bytes": host, "disk_cache_bytes": disk, "host_cache_hbm_ratio": ratio,
            "cache_source": (source("host-cache-bytes", "DRAM"),
                             source("disk-cache-bytes", "drives"))}


# ---------------------------------------------------------------------------- checks
def _one_line(exc):
    return " ".join(str(exc).split())[:200]


#: the most a cache setting may size, in its unit: a node's DRAM or drives hold at most 1e15 B
#: (nodes.csv host_dram_bytes' bound; a disk cache per rank likewise), about 1e6 GiB or GB; a
#: chunk or page at most 1e9 tokens (no context window is longer); SGLang's host pool at most
#: 1e6 times its device pool
SETTING_BOUNDS = {"B": 1e15, "GiB": 1e6, "GB": 1e6, "tokens": 1e9, "ratio": 1e6}


def _number(path, key, value, unit, minimum=0.0, integer=False, above=False):
    """A setting's number in ``unit`` (a key of :data:`SETTING_BOUNDS`, its physical most),
    from minimum (exclusive when above), refused otherwise with the file, the setting and the
    unit named (a 400-digit integer is a DataError, not an overflow)."""
    most = SETTING_BOUNDS[unit]
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok:
        ok = -most <= value <= most and (value > minimum if above else value >= minimum)
    if ok and integer:
        ok = float(value).is_integer()
    if not ok:
        words = "a whole number" if integer else "a number"
        bound = f"above {minimum:g}" if above else f"of at least {minimum:g}"
        shown = repr(value) if len(repr(value)) < 40 else repr(value)[:37] + "..."
        unit_words = "" if unit == "ratio" else f" {unit}"
        raise DataError(path, None, key, f"expected {words} {bound} and at most "
                        f"{most:g}{unit_words}, got {shown}")
    return int(value) if integer else float(value)


def _flag(path, key, value):
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise DataError(path, None, key, f"expected true or false, got {value!r}")


def _one_of(path, key, value, choices):
    if value not in choices:
        raise DataError(path, None, key, f"expected one of {', '.join(choices)}, got {value!r}")
    return value


# ---------------------------------------------------------------------------- vLLM
_SUFFIX = re.compile(r"(?<=[:\[,\s])(\d+(?:\.\d+)?)([kmgtKMGT])(?=\s*[,}\]])")
_SCALE = {"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30,
          "T": 2 ** 40}


#: a JSON string literal: size suffixes inside one are text, not sizes
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _expand_sizes(text):
    """text with every unquoted size suffix outside JSON strings expanded (a path such as
    "/mnt/kv 80g, a" keeps its text)."""
    def sizes(part):
        return _SUFFIX.sub(lambda m: repr(float(m.group(1)) * _SCALE[m.group(2)]), part)
    out, last = [], 0
    for m in _STRING.finditer(text):
        out += [sizes(text[last:m.start()]), m.group(0)]
        last = m.end()
    return "".join(out + [sizes(text[last:])])


def _json(path, text):
    """vLLM's JSON, its unquoted size suffixes expanded as vLLM expands them."""
    expanded = _expand_sizes(text)
    try:
        data = json.loads(expanded)
    except (ValueError, RecursionError) as exc:  # ValueError: also Python's int-digit limit
        raise DataError(path, None, None, f"not readable JSON ({_one_line(exc)})") from None
    if not isinstance(data, dict):
        raise DataError(path, None, None, "expected a JSON object (vLLM's --kv-transfer-config)")
    return data


_VLLM_KNOWN = {"kv_connector", "kv_role", "kv_connector_extra_config", "engine_id",
               "kv_buffer_device", "kv_port", "kv_connector_module_path",
               "enable_permute_local_kv", "kv_load_failure_policy",
               # fields of older releases' KVTransferConfig (before v0.33.0): read, not modelled
               "kv_buffer_size", "kv_rank", "kv_parallel_size", "kv_ip"}
_OFFLOAD_MODELLED = {"cpu_bytes_to_use", "spec_name", "secondary_tiers"}


def _vllm(path, data):
    connector = data.get("kv_connector")
    if connector is None:
        raise DataError(path, None, "kv_connector", "missing: vLLM's --kv-transfer-config names "
                        "its connector (OffloadingConnector or LMCacheConnectorV1)")
    extra = data.get("kv_connector_extra_config", {})
    if not isinstance(extra, dict):
        raise DataError(path, None, "kv_connector_extra_config", "expected a JSON object")
    unknown = sorted(set(data) - _VLLM_KNOWN)
    older = sorted(set(data) & {"kv_buffer_size", "kv_rank", "kv_parallel_size", "kv_ip"})
    if unknown:
        raise DataError(path, None, unknown[0], "not a field of vLLM's KVTransferConfig "
                        f"(expected one of {', '.join(sorted(_VLLM_KNOWN))})")
    if connector == "LMCacheConnectorV1":
        settings = {k[len("lmcache."):]: v for k, v in extra.items() if k.startswith("lmcache.")}
        cfg = _lmcache(path, settings, "vllm-lmcache")
        others = sorted(k for k in extra if not k.startswith("lmcache."))
        return replace(cfg, not_modelled=cfg.not_modelled + tuple(others))
    if connector != "OffloadingConnector":
        raise DataError(path, None, "kv_connector", f"{connector!r} has no kvmath engine "
                        "profile; expected OffloadingConnector or LMCacheConnectorV1 (or give "
                        "--engine NAME)")
    if "cpu_bytes_to_use" not in extra:
        raise DataError(path, None, "cpu_bytes_to_use", "missing: vLLM's OffloadingConnector "
                        "requires it (bytes of host memory for the whole engine)")
    cpu = _number(path, "cpu_bytes_to_use", extra["cpu_bytes_to_use"], "B", minimum=1)
    engine = engines()[VLLM_PROFILE]
    # canonical_layout writes replicated GQA heads once, but only under TieringOffloadingSpec,
    # and host capacity is still reserved for every rank's copy (engine_settings.csv): read,
    # not modelled (the cache still occupies every rank's copy)
    _flag(path, "canonical_layout", extra.get("canonical_layout", False))
    spec = extra.get("spec_name", "CPUOffloadingSpec")
    _one_of(path, "spec_name", spec, ("CPUOffloadingSpec", "TieringOffloadingSpec"))
    tiers = extra.get("secondary_tiers", [])
    if not isinstance(tiers, list) or not all(isinstance(t, dict) for t in tiers):
        raise DataError(path, None, "secondary_tiers", "expected a list of objects")
    if tiers and spec != "TieringOffloadingSpec":
        raise DataError(path, None, "secondary_tiers", "only TieringOffloadingSpec takes "
                        "secondary tiers (vllm/v1/kv_offload/tiering/spec.py)")
    kinds = [t.get("type") for t in tiers]
    disk = "fs" in kinds
    other = [k for k in kinds if k != "fs"]
    not_modelled = older + sorted(set(extra) - _OFFLOAD_MODELLED) + [
        f"secondary_tiers type {k}" for k in other]
    return EngineConfig(path, "vllm", engine, host_cache_bytes_per_engine=cpu, disk_tier=disk,
                        settings={"kv_connector": connector, "cpu_bytes_to_use": cpu,
                                  "spec_name": spec, "secondary_tiers": kinds},
                        not_modelled=tuple(not_modelled))


# ---------------------------------------------------------------------------- LMCache
_LMCACHE_MODELLED = {"chunk_size", "local_cpu", "max_local_cpu_size", "local_disk",
                     "max_local_disk_size", "extra_config"}


def _lmcache_file(path, text):
    import yaml
    try:
        data = yaml.safe_load(text)
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        raise DataError(path, None, None, f"not readable YAML ({_one_line(exc)})") from None
    if not isinstance(data, dict):
        raise DataError(path, None, None, "expected a YAML mapping of LMCache settings")
    odd = [k for k in data if not isinstance(k, str)]
    if odd:
        raise DataError(path, None, None, f"expected setting names, got {odd[0]!r}")
    return _lmcache(path, data, "lmcache")


def _lmcache(path, data, fmt):
    engine = engines()[LMCACHE_PROFILE]
    chunk = _number(path, "chunk_size", data.get("chunk_size", default("lmcache-chunk-size")),
                    "tokens", minimum=1, integer=True)
    engine = replace(engine, copy_tokens=float(chunk))  # one chunk of all layers per copy
    extra = data.get("extra_config") or {}
    if not isinstance(extra, dict) or not all(isinstance(k, str) for k in extra):
        raise DataError(path, None, "extra_config", "expected a mapping of setting names")
    first_rank = True  # save_only_first_rank's default: the model is MLA (cache_engine.py)
    if "save_only_first_rank" in extra:
        first_rank = _flag(path, "extra_config.save_only_first_rank", extra["save_only_first_rank"])
        rule = "mla" if first_rank else "never"  # rank 0 stores and reads, or every rank
        engine = replace(engine, stored_once=rule, replicated_read_once=rule)
    cpu_on = _flag(path, "local_cpu", data.get("local_cpu", True))
    cpu_gib = _number(path, "max_local_cpu_size", data.get(
        "max_local_cpu_size", default("lmcache-max-local-cpu-size") / GIB), "GiB")
    disk_dir = data.get("local_disk")
    disk_gib = _number(path, "max_local_disk_size", data.get(
        "max_local_disk_size", default("lmcache-max-local-disk-size") / GIB), "GiB")
    disk = bool(disk_dir) and disk_gib > 0  # both, or no disk backend (storage_backend/__init__)
    not_modelled = sorted(set(data) - _LMCACHE_MODELLED) + sorted(
        f"extra_config.{k}" for k in extra if k != "save_only_first_rank")
    if fmt == "vllm-lmcache":  # the settings as the file names them
        not_modelled = [f"lmcache.{k}" for k in not_modelled]
    return EngineConfig(path, fmt, engine, first_rank_only=first_rank,
                        host_cache_bytes_per_gpu=cpu_gib * GIB if cpu_on else 0.0,
                        disk_tier=disk, disk_cache_bytes_per_gpu=disk_gib * GIB if disk else None,
                        settings={"chunk_size": chunk, "local_cpu": cpu_on,
                                  "max_local_cpu_size_GiB": cpu_gib, "local_disk": disk_dir,
                                  "max_local_disk_size_GiB": disk_gib},
                        not_modelled=tuple(not_modelled))


# ---------------------------------------------------------------------------- SGLang
_SGLANG_LAYOUTS = ("layer_first", "page_first", "page_first_direct", "page_first_kv_split",
                   "page_head")
_SGLANG_IO = ("direct", "kernel", "kernel_ascend")


def _sglang(path, text):
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message):
            raise DataError(path, None, None, f"SGLang flags: {message}")

    ap = Parser(add_help=False, allow_abbrev=False)
    ap.add_argument("--enable-hierarchical-cache", "--enable-hicache", action="store_true")
    ap.add_argument("--hicache-size", type=float, default=None)
    ap.add_argument("--hicache-ratio", type=float, default=None)
    ap.add_argument("--hicache-io-backend", default="kernel")
    ap.add_argument("--hicache-mem-layout", default="page_first")
    ap.add_argument("--hicache-storage-backend", default=None)
    ap.add_argument("--page-size", type=float, default=None)
    try:
        words = shlex.split(text, comments=True)
    except ValueError as exc:
        raise DataError(path, None, None, f"SGLang flags: {exc}") from None
    args, rest = ap.parse_known_args(words)
    if not args.enable_hierarchical_cache:
        raise DataError(path, None, "--enable-hierarchical-cache", "missing: SGLang offloads to "
                        "host memory only with HiCache on")
    io = _one_of(path, "--hicache-io-backend", args.hicache_io_backend, _SGLANG_IO)
    layout = _one_of(path, "--hicache-mem-layout", args.hicache_mem_layout, _SGLANG_LAYOUTS)
    if layout == "page_first_direct" or io == "direct":  # each forces the other (hicache_hook.py)
        io, layout = "direct", "page_first_direct"
    if io == "kernel_ascend":
        raise DataError(path, None, "--hicache-io-backend", "kernel_ascend runs on Ascend NPUs, "
                        "which kvmath has no GPU rows for")
    page = _number(path, "--page-size", default("sglang-page-size") if args.page_size is None
                   else args.page_size, "tokens", minimum=1, integer=True)
    size_GB = _number(path, "--hicache-size", default("sglang-hicache-size") / 1e9
                      if args.hicache_size is None else args.hicache_size, "GB")
    size = size_GB * SETTING_UNITS["GB"]
    ratio = None
    if size == 0:
        ratio = _number(path, "--hicache-ratio", default("sglang-hicache-ratio")
                        if args.hicache_ratio is None else args.hicache_ratio, "ratio", minimum=1,
                        above=True)  # SGLang asserts the host pool is larger than the device's
    engine = engines()[SGLANG_DIRECT if io == "direct" else SGLANG_KERNEL]
    if io == "direct":
        engine = replace(engine, copy_tokens=float(page))  # one page of one layer per copy
    backend = args.hicache_storage_backend
    not_modelled = [w for w in rest if w.startswith("--")]
    if backend not in (None, "file"):
        not_modelled.append(f"--hicache-storage-backend {backend} (a pool: not modelled)")
    return EngineConfig(path, "sglang", engine,
                        host_cache_bytes_per_gpu=size if size else None,
                        host_cache_hbm_ratio=ratio, disk_tier=backend == "file",
                        settings={"hicache_io_backend": io, "hicache_mem_layout": layout,
                                  "hicache_size_GB": size_GB, "hicache_ratio": ratio,
                                  "page_size": page, "hicache_storage_backend": backend},
                        not_modelled=tuple(not_modelled))
