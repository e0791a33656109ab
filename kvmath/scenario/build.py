"""The scenario record of a command line: :func:`scenario_of`, the one place every command
(compare, reuse, tiers, trace, route, fleet) turns its parsed options into a
:class:`~kvmath.scenario.record.Scenario`.

It reads the scenario (:func:`kvmath.scenario.read.read_scenario`: the ``--scenario`` file
merged under the flags, the checks across options, the declared defaults), resolves the rows the
options name and fills every other field from :func:`~kvmath.scenario.record.record_values`:

* the model as served (:func:`kvmath.scenario.read.model_of`: under ``--rope-scaling``, the
  window its card states);
* the node and its GPU (:func:`node_and_gpu`): ``--node``, else a bundled node with ``--gpu``'s
  GPU, else dgx-h100, the GPU counted as the node holds it; compare takes a node only when one is
  given, reuse when ``--resume-rate`` prices holding on one;
* the tier (:func:`tier_of`): a tiers.csv row, compare's ``hbm`` and ``pool:NAME``, or a
  ``--pool`` shared by ``--pool-nodes`` nodes (:func:`pool_of`), on the node's own drives and
  NICs where ``--node`` names one, and reuse's nvme on the drives of the node its
  ``--resume-rate`` plans (:func:`kvmath.logic.path.node_tier`);
* the engine (:func:`kvmath.scenario.engine_config.engine_of`: ``--engine``, or the profile of
  the engine's own settings in ``--engine-config``), the codec, the pause, and the rows of a
  ``--prices`` file (:func:`price_overrides` adds the per-item price flags to them);
* for the commands planning a whole node (tiers, trace, route, fleet), the TP: ``--tp``, refused
  above the node's GPUs; else the layout default every command takes (:func:`node_tp`), which
  tiers settles here and the trace commands once their trace says how long its prompts run.

What the scenario layer cannot resolve stays with the command that needs it: the share of
returns a router sends back to the cache's node (``reach``, by the routers' rule: the reuse and
tiers commands set it on the record), and the trace itself.
"""
from __future__ import annotations

import datetime
from dataclasses import replace
from typing import NamedTuple

from kvmath.errors import UsageError
from kvmath.logic.constants import MIN_PREFIX_TOKENS
from kvmath.logic.layout import choose_layout
from kvmath.logic.path import node_gpu, node_tier
from kvmath.logic.rules import dense_flops
from kvmath.logic.reuse import PRICE_OPTIONS
from kvmath.logic.runtime import ScenarioError
from kvmath.scenario.engine_config import EngineConfig, check_tier, engine_of
from kvmath.scenario.options import COMPARE, FLEET, REUSE, ROUTE, TIERS, TRACE
from kvmath.scenario.read import model_of, read_scenario
from kvmath.scenario.record import Scenario, record_values
from kvmath.tables.rows import (DataError, Model, node_for_gpu, prices, resolve_codec,
                                resolve_gpu, resolve_node, resolve_pause, resolve_pool,
                                resolve_tier)
from kvmath.tables.schema import Row, read
from kvmath.tiers.build import HBM_TIER, pool_tier, pool_tiers
from kvmath.tiers.kinds import KINDS


#: the commands that plan a whole node (its tiers, or a trace on it): a scenario of theirs always
#: has a node, and a TP on it
NODE_COMMANDS = (TIERS, TRACE, ROUTE, FLEET)


class Built(NamedTuple):
    """What :func:`scenario_of` gives: the record, and the engine's own settings where
    ``--engine-config`` gave them (the node commands size their caches from them, and every
    command's output says what they set)."""
    scenario: Scenario
    engine_config: EngineConfig | None


def scenario_of(args, command) -> Built:
    """The scenario of ``command``'s parsed options ``args``: read (the file merged, checked,
    defaults applied: ``args`` is filled in place), its rows resolved, every other field from
    the options. A user's mistake raises an :class:`~kvmath.errors.InputError` (UsageError for
    options that do not go together), as each helper below says."""
    read_scenario(args, command)
    pool, pool_nodes = pool_of(args, tier_given=bool(getattr(args, "tier", None)))
    tier = tier_of(args, command, pool, pool_nodes)
    if command == COMPARE and not args.node:  # the GPU as gpus.csv gives it: no node
        node, gpu = None, resolve_gpu_of(args)
    else:  # reuse needs a node only to price holding on one (--resume-rate)
        node, gpu = node_and_gpu(args, need_node=command != REUSE or args.resume_rate is not None)
    if tier is not None and node is not None and (
            args.node or (pool is None and tier.name == KINDS[tier.kind].node_tier)):
        # the node given, or the one reuse plans: its own drives, and its NICs for a pool
        tier = node_tier(node, tier)
    if pool is not None and node is None:
        check_pool_nics(pool, gpu, args.pool)
    engine, cfg = engine_of(args)
    if tier is not None:
        check_tier(cfg, tier)
    model = model_of(args)
    values = record_values(args)
    if command in NODE_COMMANDS and args.tp is not None and args.tp > node.gpus:
        raise ScenarioError(f"--tp {args.tp} exceeds the node's {node.gpus} GPUs")
    pause = resolve_pause(args.pause) if getattr(args, "pause", None) else None
    codec = resolve_codec(args.codec) if getattr(args, "codec", None) else None
    values["pool_nodes"] = pool_nodes  # given, or the pool's default
    record = Scenario(model=model, gpu=gpu, tier=tier, node=node, engine=engine, codec=codec,
                      pool=pool, pause=pause, prices=prices_of(args), **values)
    if command == TIERS:  # its prompts are --tokens; a trace's are read later
        record = with_node_tp(record, args.tokens)
    return Built(record, cfg)


def resolve_gpu_of(args):
    """The row of ``--gpu`` (a bundled name or a gpus CSV row), or None when not given."""
    gpu = getattr(args, "gpu", None)
    return resolve_gpu(gpu) if gpu else None


def node_and_gpu(args, need_node=True):
    """(node, gpu): --node, else a bundled node with --gpu's GPU, else dgx-h100 (node None
    when not needed and not given); the GPU is the node's, counted as the node holds it
    (--gpu, where given, must be it), and able to compute in --compute-dtype."""
    gpu = resolve_gpu_of(args)
    if not need_node and not args.node:
        node = None
    elif args.node:
        node = resolve_node(args.node)
    elif gpu is not None:
        node = node_for_gpu(gpu.name)
        if node is None:
            raise ScenarioError(f"no bundled node has GPU {gpu.name!r}: give --node FILE "
                                "(a nodes CSV row in the bundled format)")
    else:
        node = resolve_node("dgx-h100")
    slice_gpus = getattr(args, "node_gpus", None)
    if node is not None and slice_gpus:
        node = node_slice(node, slice_gpus)
    if node is not None:  # the node's GPU (--gpu must be it), with the node's GPU count
        gpu = node_gpu(node, resolve_gpu(node.gpu), gpu)
    dtype = getattr(args, "compute_dtype", None)
    if dtype is not None:  # a dtype the GPU cannot compute in: its row and field
        dense_flops(gpu, dtype)
    return node, gpu


def node_slice(node, gpus):
    """``gpus`` of ``node``'s GPUs as a node of their own, with their share of its host DRAM,
    drives and NICs (whole drives and NICs, rounded down): a rack slice of an NVL72, whose
    GPUs share one NVLink domain. ScenarioError when the node has fewer."""
    if gpus > node.gpus:
        raise ScenarioError(f"--node-gpus {gpus}: node {node.name} has {node.gpus} GPUs")
    share = gpus / node.gpus
    return replace(node, name=f"{node.name}[{gpus}]", gpus=gpus,
                   host_dram_bytes=node.host_dram_bytes * share,
                   nvme_drives=int(node.nvme_drives * share), nics=max(int(node.nics * share), 1))


def pool_of(args, tier_given=False):
    """(Pool row, GPU nodes sharing it) of --pool and --pool-nodes (default: the fleet's
    --nodes when more than one, else the pool row's gpu_nodes), or (None, None)."""
    pool_nodes = getattr(args, "pool_nodes", None)
    if not getattr(args, "pool", None):
        if pool_nodes is not None:
            raise UsageError("--pool-nodes needs --pool (the pool the nodes share)")
        return None, None
    if tier_given:
        raise UsageError("give --tier or --pool, not both (the pool is the tier reloaded from)")
    pool = resolve_pool(args.pool)
    fleet = getattr(args, "nodes", 1) or 1
    return pool, pool_nodes or (fleet if fleet > 1 else pool.gpu_nodes)


#: the most NICs a GPU node holds per GPU where no node is given (a DGX H100: 8 compute NICs
#: and 2 storage NICs for 8 GPUs): a pool read over more than this many per GPU is refused
NICS_PER_GPU = 2


def check_pool_nics(pool, gpu, given=None):
    """Refuse a pool whose engines read it over more NICs per GPU node (pools.csv client_nics)
    than a node of ``gpu``'s GPUs holds, where no node is given (a node given is held to its own
    NICs: :func:`kvmath.logic.path.node_tier`); ``given``: --pool as given (a file is named
    with its row)."""
    if gpu is None:
        return
    most = NICS_PER_GPU * gpu.gpus_per_node
    if pool.client_nics > most:
        where = (f"{given}, row 1, field 'client_nics'" if given and given != pool.name
                 else "pools.csv client_nics")
        raise ScenarioError(f"--pool {pool.name}: its engines read it over {pool.client_nics} "
                            f"NICs per GPU node ({where}), and a node of "
                            f"{gpu.gpus_per_node} {gpu.name} GPUs holds at most {most} "
                            f"({NICS_PER_GPU} per GPU); give --node, a nodes CSV row with the "
                            "node's own NICs (nodes.csv nics)")


def tier_of(args, command, pool=None, pool_nodes=None):
    """The tier a scenario reloads from: the pool's as its ``pool_nodes`` nodes share it, else
    --tier's (tiers.csv; compare also takes hbm, the prefix still in GPU memory, and pool:NAME,
    a bundled pool shared by the nodes its row deploys, as the calculator names it); None for
    the commands that take no tier."""
    if pool is not None:
        return pool_tier(pool, pool_nodes)
    name = getattr(args, "tier", None)
    if name is None:
        return None
    if command == COMPARE:
        if name.startswith("pool:") and name in pool_tiers():
            return pool_tiers()[name]
        if name == HBM_TIER.name:
            return HBM_TIER
    return resolve_tier(name)


def node_tp(s, tokens):
    """The TP scenario ``s`` takes on its node when it gives none: the layout default every
    command takes, stated once (:func:`kvmath.logic.layout.choose_layout`: the sourced
    deployment for the model and GPU, else the smallest TP that holds the weights, a prompt of
    ``tokens`` tokens and its share of the node's running batch); ScenarioError when that is
    more than the node's GPUs."""
    node = s.node
    gpu = s.gpu if s.gpu is not None else node_gpu(node, resolve_gpu(node.gpu), None)
    layout = choose_layout(replace(s, gpu=gpu, tp=None), max(float(tokens), MIN_PREFIX_TOKENS),
                           None, False)
    if layout.tp > node.gpus:
        raise ScenarioError(f"{s.model.name} with {tokens:,.0f}-token prompts takes TP "
                            f"{layout.tp} on {gpu.name} ({layout.reason}): more than node "
                            f"{node.name}'s {node.gpus} GPUs; give --tp, or a larger node")
    return layout.tp


def with_node_tp(s, tokens):
    """Scenario ``s`` on its node with its TP settled: its own, else :func:`node_tp` at prompts
    of ``tokens`` tokens (a trace's running context)."""
    return s if s.tp is not None else replace(s, tp=node_tp(s, tokens))


def node_layout_tp(model, node, tokens, **fields):
    """:func:`node_tp` of a scenario given by its fields (gpu, engine, compute_dtype,
    batch_seqs, batch_context): the default TP of a node's plan or replay in Python."""
    return node_tp(Scenario(model=model, gpu=fields.pop("gpu", None), tier=None, node=node,
                            **{k: v for k, v in fields.items() if v is not None}), tokens)


def prices_of(args):
    """((name, Price row), ...) of a --prices file, each name one of prices.csv's; None when
    no file is given."""
    path = getattr(args, "prices", None)
    if not path:
        return None
    known = prices()
    out = {}
    for name, row in read(Row.types["prices"], path).items():
        if name not in known:
            raise DataError(path, None, "name", f"unknown price {name!r}; expected one "
                            f"of {', '.join(sorted(known))}")
        out[name] = row
    return tuple(sorted(out.items()))


def price_overrides(s):
    """((name, Price row), ...) replacing prices.csv rows in scenario ``s``: its --prices
    file's, then the per-item prices (dram_price, nvme_price: observed the day they are given,
    a user's own price is never stale)."""
    rows = dict(prices())
    out = dict(s.prices or ())
    for flag, name in PRICE_OPTIONS.items():
        value = getattr(s, flag)
        if value is not None:
            out[name] = replace(rows[name], value=value, observed=datetime.date.today(),
                                kind="assumption", source=f"--{flag.replace('_', '-')}",
                                source_location="command line")
    return tuple(sorted(out.items()))
