"""Every option of every command, declared once.

An :class:`Option` holds the flag, its kind (type and bounds), unit, help, default, the
commands that take it, its scenario-file (TOML) key and whether the book's calculator has it
(under the same name, with the form's words in ``label``). The argument parser of each
command (:func:`add_options`), the scenario file's checks (:func:`check_toml`) and the
calculator's form and bounds (:func:`calculator_options`) are built from this one table, so
a bound or a help text cannot differ between them.
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field, replace

from kvmath.fleet.routers import NAMES as ROUTERS
from kvmath.scenario.schedulers import PROFILES as SCHEDULERS
from kvmath.tables.rows import DTYPE_BYTES, rope_scalings

#: the largest integer any option accepts: beyond it no deployment exists and floats lose digits
MAX_INT = 10 ** 9
#: the magnitudes a real-valued option may take: beyond them products of inputs under- or
#: overflow (a bandwidth of 1e-300 GB/s times an efficiency of 1e-300 is zero)
SMALLEST, LARGEST = 1e-15, 1e15

#: pause distribution of reuse and tiers: pauses.csv row fitted to the conversation trace
DEFAULT_PAUSE = "conversation-fitted"
#: the trace replay's tier policies
POLICIES = ("lru", "ttl", "selective")
#: seconds to wait for a Dask scheduler (fleet --dask ADDRESS) to answer before giving up
DASK_TIMEOUT_S = 10

COMPARE, REUSE, TIERS, TRACE, ROUTE, FLEET = "compare", "reuse", "tiers", "trace", "route", "fleet"
#: the commands that read a scenario
COMMANDS = (COMPARE, REUSE, TIERS, TRACE, ROUTE, FLEET)


@dataclass(frozen=True)
class Kind:
    """A value type with its bounds: ``integer`` values are whole numbers; bounds are
    inclusive unless ``below_max`` (the value must stay under ``maximum``)."""
    words: str                      #: what is expected, as an error message says it
    integer: bool = False
    minimum: float | None = None
    maximum: float | None = None
    below_max: bool = False
    choices: tuple = ()
    flag: bool = False              #: a switch: true when given
    text: bool = False              #: a name, or a file path
    max_chars: int | None = None    #: the longest text it takes (a name or path)
    unit: str = ""                  #: what its numbers count ("tokens", "GB/s", ...)
    why: str = ""                   #: why its bounds are what they are (physics, in words)

    def ok(self, v) -> bool:
        if self.choices:
            return v in self.choices
        if self.flag:
            return isinstance(v, bool)
        if self.text:
            return isinstance(v, str) and bool(v.strip()) and (
                self.max_chars is None or len(v) <= self.max_chars)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return False
        if self.integer and not isinstance(v, int):
            return False
        if not math.isfinite(v):
            return False
        if self.minimum is not None and v < self.minimum:
            return False
        if self.maximum is not None and (v >= self.maximum if self.below_max else v > self.maximum):
            return False
        return True

    def from_text(self, text: str):
        """The value of a command-line word, or ValueError saying what was expected."""
        if self.choices or self.text:
            value = text
        else:
            try:
                value = int(text) if self.integer else float(text)
            except ValueError:
                value = None
        if value is None or not self.ok(value):
            shown = repr(text) if len(text) <= 60 else (
                repr(text[:57]) + f"... ({len(text):,} characters)")
            raise ValueError(f"expected {self.words}, got {shown}")
        return value.strip() if self.text else value

    def from_toml(self, value):
        """A scenario file's value, checked (integers stay integers, numbers become float)."""
        if not self.ok(value):
            raise ValueError(f"expected {self.words}")
        if self.text:
            return value.strip()
        if not (self.choices or self.flag or self.integer):
            return float(value)
        return value


#: the longest name or path an option takes: a path's longest on Linux (PATH_MAX); a 5 MB name
#: in a scenario file was looked up as a file (ENAMETOOLONG, a traceback)
MAX_TEXT_CHARS = 4096
TEXT = Kind(f"non-empty text of at most {MAX_TEXT_CHARS:,} characters", text=True,
            max_chars=MAX_TEXT_CHARS)
POSITIVE_INT = Kind(f"a positive integer of at most {MAX_INT:,}", integer=True, minimum=1,
                    maximum=MAX_INT)
COUNT = Kind(f"a non-negative integer of at most {MAX_INT:,}", integer=True, minimum=0,
             maximum=MAX_INT)
POSITIVE = Kind(f"a positive number from {SMALLEST:g} to {LARGEST:g}", minimum=SMALLEST,
                maximum=LARGEST)
FRACTION = Kind(f"a fraction from {SMALLEST:g} to 1", minimum=SMALLEST, maximum=1)
SAMPLE = Kind(f"a fraction from {SMALLEST:g} to below 1", minimum=SMALLEST, maximum=1,
              below_max=True)
COUNT_BYTES = Kind(f"a number of bytes from 0 to {LARGEST:g}", minimum=0, maximum=LARGEST)
RESERVE = Kind("a fraction in [0, 1)", minimum=0, maximum=1, below_max=True)
FLAG = Kind("true or false", flag=True)


def bounded(unit, minimum, maximum, why, integer=False):
    """A number of ``unit`` within physical bounds, ``why`` they are what they are; its words
    say the unit and both bounds ("a whole number of GPUs from 1 to 4,096")."""
    fmt = "{:,}" if integer else "{:g}"
    return Kind(f"{'a whole number' if integer else 'a number'} of {unit} from "
                f"{fmt.format(minimum)} to {fmt.format(maximum)}", integer=integer,
                minimum=minimum, maximum=maximum, unit=unit, why=why)


#: the options' physical bounds, each with its unit and reasoning (issue 37)
TOKENS = bounded("tokens", 1, 10 ** 9, "at most 1e9 tokens: 100x the longest context window "
                 "(Llama 4 Scout's 10M), and models.csv max_context_tokens' bound", integer=True)
GPUS = bounded("GPUs", 1, 4096, "at most 4,096 GPUs in one replica: 64 nodes of 64 (nodes.csv "
               "gpus' bound)", integer=True)
SEQUENCES = bounded("sequences", 1, 10 ** 6, "at most a million sequences in HBM: no GPU holds "
                    "more (each holds at least one token's KV)", integer=True)
RUNNING = bounded("sequences", 0, 10 ** 6, "at most a million sequences in a node's running "
                  "batch (engines' defaults run 256 to 1,024)", integer=True)
NODES = bounded("nodes", 1, 10 ** 6, "at most a million GPU nodes (pools.csv gpu_nodes' "
                "bound)", integer=True)
USES = bounded("uses", 1, 10 ** 9, "at most 1e9 uses of one block", integer=True)
PER_S = bounded("resumes per second", SMALLEST, 1e6, "at most a million resumes per second on "
                "one node: each is at least one prefill or reload")
REPLICAS = bounded("replicas", SMALLEST, 4096, "at most 4,096 replicas: a node of 4,096 GPUs at "
                   "TP 1 (the node's own GPUs / TP bound it further)")
GBPS = bounded("GB/s", 1e-6, 1e6, "from 1 kB/s to 1e6 GB/s: links.csv bandwidth_Bps' bound "
               "(1e15 B/s, about 45x the fastest HBM)")
USD_GPU_HOUR = bounded("USD per GPU-hour", 1e-6, 1e4, "at most 1e4 USD per GPU-hour "
                       "(gpu_prices.csv's bound)")
USD_GB = bounded("USD per GB", 1e-6, 1e4, "at most 1e4 USD per 1e9 B (prices.csv's bound)")
HOST_BYTES = bounded("bytes", 0, 1e15, "at most 1e15 B: nodes.csv host_dram_bytes' bound")
DISK_BYTES = bounded("bytes", 0, 1e19, "at most 1e19 B: 1,024 drives of 1e16 B (nodes.csv "
                     "bounds)")
POOL_BYTES = bounded("bytes", 1, 1e18, "at most 1e18 B: pools.csv storage_node_bytes' bound")
SECONDS = bounded("seconds", 1e-6, 1e9, "from 1 microsecond to 1e9 s (about 30 years)")
TURN_TOKENS = bounded("tokens", 1e-6, 1e9, "a mean of at most 1e9 tokens (TOKENS' bound)")


def choice(*values):
    return Kind("one of " + ", ".join(values), choices=tuple(values))


@dataclass(frozen=True)
class Option:
    """One option: ``--name`` on the command line, ``name`` with ``_`` for ``-`` in a scenario."""
    name: str
    kind: Kind
    help: str
    commands: tuple
    unit: str = ""
    metavar: str | None = None
    default: object = None          #: applied after the scenario file is merged
    required: tuple = ()            #: the commands that need it (on the line or in the file)
    help_for: dict = field(default_factory=dict)   #: a command's own help text
    toml: bool = True               #: a scenario file may hold it
    label: str | None = None        #: the calculator's words for it; None: not in the calculator
    path: object = False            #: True: a value ending in .csv is a file, relative to the
    #:                                 scenario; "file": the value is always a file
    required_unless: str | None = None  #: the option that stands in for this one when given
    needs: str | None = None        #: an option without which this one means nothing ("pool"),
    #:                                 or the value it must have ("policy=ttl"): given without
    #:                                 it, this one is refused (never silently ignored)
    excludes: tuple = ()            #: options that mean nothing beside this one, refused when
    #:                                 given with it (never silently ignored), for the reason
    excludes_why: str = ""          #: ... given here
    #: the field of the scenario record (kvmath.scenario.record.Scenario) this option sets:
    #: "" its key; None: no field (it varies per evaluation, as the prompt's tokens, or only
    #: steers how a command runs or prints)
    field: str | None = ""
    scale: float = 1.0              #: the record's unit over the option's (GB/s -> B/s: 1e9)
    row: str | None = None          #: the table whose row a name or CSV path gives (the record
    #:                                 holds the row): models, gpus, tiers, nodes, engines, ...
    repeat: bool = False            #: given any number of times (a scenario file: a list); the
    #:                                 record holds a tuple of the values

    @property
    def key(self) -> str:
        return self.name.replace("-", "_")

    @property
    def record_field(self) -> str | None:
        """The scenario record's field this option sets, or None."""
        return None if self.field is None else (self.field or self.key)

    def help_of(self, command: str) -> str:
        text = self.help_for.get(command, self.help)
        if command in self.required:
            text += (f" (required unless --{self.required_unless} is given)"
                     if self.required_unless else " (required)")
        return text


def _models(what="model", table="models"):
    return f"bundled {what} name or path to a {table} CSV row"


_TP_NODE = ("tensor-parallel GPUs (default: all of the node's, or the largest TP below that the "
            "model's attention heads allow)")
_PAUSE = ("pause distribution: bundled name or path to a pauses CSV row (default %s, fitted to "
          "Mooncake's conversation trace; chat-lognormal is the assumed what-if)" % DEFAULT_PAUSE)

OPTIONS = (
    Option("model", TEXT, _models(), COMMANDS, required=COMMANDS, path=True, label="model",
           row="models"),
    Option("gpu", TEXT, _models("GPU", "gpus"), (COMPARE, REUSE, TIERS, TRACE, ROUTE, FLEET), path=True,
           label="GPU",
           row="gpus",
           required=(COMPARE, REUSE), required_unless="node",
           help_for={TIERS: "bundled GPU name or gpus CSV row (default: the node's GPU)"}),
    Option("tier", TEXT, "tier the cache is offloaded to", (COMPARE, REUSE),
           required=(COMPARE, REUSE), label="tier", required_unless="pool", row="tiers",
           help_for={COMPARE: "tier: host-dram, nvme, rdma, ..., or hbm (the prefix still in "
                     "GPU memory: no load, the engine's costs remain)"}),
    Option("tokens", TOKENS, "tokens in the cached prefix", (COMPARE, REUSE, TIERS),
           unit="tokens", required=(COMPARE, REUSE, TIERS), label="prompt length (tokens)",
           field=None,
           help_for={TIERS: "tokens per paused conversation"}),
    Option("new-tokens", TOKENS, "the new turn's own tokens, computed after the prefix "
           "either way (default 1)", (COMPARE,), unit="tokens", metavar="N", default=1),
    Option("token-ids", FLAG, "the prompt arrives as token IDs: the engine does not tokenise it",
           (COMPARE,), default=False),
    Option("node", TEXT, "bundled node name or path to a nodes CSV row (default: a bundled node "
           "with the GPU of --gpu, else dgx-h100)", COMMANDS, path=True, label="node", row="nodes",
           help_for={COMPARE: "node: bundled name or path to a nodes CSV row, as tiers and reuse "
                     "take; sets the GPU (--gpu may be left out), its count, and the drives the "
                     "nvme tier stripes (default: the tier as tiers.csv gives it, eight drives)",
                     TRACE: "bundled node name or path to a nodes CSV row, as tiers and reuse "
                     "take (default dgx-h100)"}),
    Option("tp", GPUS, "tensor-parallel GPUs (default: smallest that fits)", COMMANDS,
           unit="GPUs", label="TP (GPUs)",
           help_for={COMPARE: "tensor-parallel GPUs of attention (default: the sourced "
                     "deployment, else the smallest that holds the weights and the batch's KV)",
                     TIERS: _TP_NODE, TRACE: _TP_NODE, ROUTE: _TP_NODE,
                     FLEET: _TP_NODE}),
    Option("ep", GPUS, "expert-parallel ranks of the routed experts: up to --tp, under "
           "tensor-parallel attention (no dispatch; the experts' output all-reduced); above it, "
           "data-parallel attention in groups of --tp GPUs, each rank dispatching its own tokens "
           "in the engine's dispatch dtype (kernels.csv); 1 shards each expert by tensor "
           "parallelism (default: the deployment's, else 1)", (COMPARE, TIERS, TRACE, ROUTE, FLEET),
           unit="GPUs",
           label="experts over (GPUs)"),
    Option("batch", SEQUENCES, "sequences of --tokens tokens whose KV must fit beside the "
           "weights (default 1)", (COMPARE,), default=1, label="sequences in HBM"),
    Option("engine", TEXT, "engine profile: bundled name (kvmath list) or path to an engines "
           "CSV row", (COMPARE, REUSE, TIERS, TRACE, ROUTE, FLEET), metavar="NAME", path=True,
           label="engine", row="engines",
           help_for={REUSE: "engine profile: bundled name (kvmath list) or path to an engines "
                     "CSV row; the copies it stores per cache set capacity, writes and wear",
                     TIERS: "engine profile: bundled name (kvmath list) or path to an engines "
                     "CSV row; the copies it stores per cache set capacity, writes and wear"}),
    Option("resume-rate", PER_S, "resumes per second on the node: also price holding at "
           "opportunity cost (the hits a held cache displaces on a node already bought)",
           (COMPARE, REUSE, TIERS), unit="1/s", metavar="PER_S", required=(TIERS,),
           label="resumes per second (node)",
           help_for={COMPARE: "resumes per second arriving at the node, each reloading from the "
                     "tier: sets the reloads sharing its drives and host memory, and the delay "
                     "they add", TIERS: "conversations resuming per second on the node"}),
    Option("concurrent-reloads", REPLICAS, "replicas reloading at once through the node's shared "
           "hops, at most the node's GPUs / TP, instead of --resume-rate (default without "
           "either: every replica reloading at once, the worst case)", (COMPARE,), metavar="N",
           label="replicas reloading at once"),
    Option("compute-dtype", choice("bf16", "fp8", "nvfp4"), "dtype of the prefill matmuls "
           "(default: the deployment's for the model and GPU, else fp8 only for fp8 weights; fp8 "
           "reads fp8 weights and nvfp4, on a GPU with FP4 tensor cores, NVFP4 weights: its GEMMs "
           "at the GPU's measured FP8 fraction of the FP4 peak, an assumption)",
           (COMPARE, REUSE, TIERS, TRACE, ROUTE, FLEET), label="compute dtype"),
    Option("bandwidth", GBPS, "effective reload bandwidth per GPU in GB/s, after all "
           "efficiency factors (overrides the tier's path and the engine)", (COMPARE,),
           unit="GB/s", metavar="GBPS", label="reload bandwidth per GPU (GB/s)",
           field="bandwidth_Bps", scale=1e9),
    Option("efficiency", FRACTION, "prefill efficiency, achieved fraction of dense peak "
           "(0 < F <= 1)", (COMPARE,), metavar="F", label="flat prefill efficiency (0–1)"),
    Option("kv-dtype", choice(*sorted(DTYPE_BYTES)), "KV element type (default: model's)",
           (COMPARE, TIERS, TRACE, ROUTE, FLEET), label="KV dtype"),
    Option("prefill", choice("calibrated", "ideal"), "prefill model: calibrated on measured "
           "operator times (default), or the ideal flat roofline upper bound", (COMPARE,),
           default="calibrated", label="prefill model"),
    Option("allow-beyond-context", FLAG, "evaluate prompts longer than the model's context "
           "window", (COMPARE,), default=False, label="beyond the context window"),
    Option("rope-scaling", choice(*sorted({m for _, m in rope_scalings()})), "serve the model "
           "at the context window its card states under this RoPE scaling (rope_scaling.csv: "
           "the factor and the pre-training window); default: its config's window", COMMANDS,
           label="RoPE scaling"),
    Option("allow-projection", FLAG, "evaluate rows of kind projection (announced parts: "
           "gpus.csv rubin, links such as cxl-gen6-x8) as a what-if; without it a command "
           "refuses them, and with it the output names each one used", COMMANDS, default=False,
           field=None),
    Option("pause", TEXT, _PAUSE, (REUSE, TIERS), path=True, default=DEFAULT_PAUSE,
           label="pause between turns (reuse)", row="pauses"),
    Option("gpu-price", USD_GPU_HOUR, "price of a GPU-hour (default: the GPU's own dated list price, "
           "gpu_prices.csv)", (REUSE, TIERS, FLEET), unit="USD/GPU-hour", metavar="USD_PER_GPU_HOUR",
           label="GPU-hour price (USD)"),
    Option("prices", TEXT, "a CSV in the format of kvmath/data/prices.csv whose rows replace the "
           "bundled ones they name (DRAM and NVMe per GB, amortisation, drive lifetime)",
           (REUSE, TIERS), metavar="FILE.csv", path="file", row="prices"),
    Option("dram-price", USD_GB, "host DRAM price per 1e9 B (default: prices.csv "
           "ddr5_usd_per_GB)", (REUSE, TIERS), unit="USD/GB", metavar="USD_PER_GB",
           label="host DRAM price (USD per GB)"),
    Option("nvme-price", USD_GB, "NVMe price per 1e9 B (default: prices.csv nvme_usd_per_GB)",
           (REUSE, TIERS), unit="USD/GB", metavar="USD_PER_GB",
           label="NVMe price (USD per GB)"),
    Option("gpu-memory-utilization", FRACTION, "fraction of HBM the engine uses (default: "
           "vLLM's, plan_defaults.csv)", (TIERS, TRACE, ROUTE, FLEET), metavar="F"),
    Option("activation-reserve", RESERVE, "share of the used HBM kept for activations and "
           "workspace (default: plan_defaults.csv, an assumption)", (TIERS,), metavar="F"),
    Option("batch-seqs", RUNNING, "sequences in the running batch of the node, whose KV stays in "
           "HBM (default: plan_defaults.csv, an assumption; route and fleet schedule their batches: "
           "--max-num-seqs, --kv-capacity)", (TIERS, TRACE), metavar="N",
           help_for={TRACE: "sequences in the running batch of the node, whose KV stays in HBM "
                     "beside the paused caches the tiers replay (default: plan_defaults.csv, an "
                     "assumption; the node served step by step schedules its own)"}),
    Option("batch-context", TOKENS, "tokens of each running sequence (default: --tokens)",
           (TIERS, TRACE, ROUTE, FLEET), unit="tokens", metavar="TOKENS",
           help_for={cmd: "context of each running sequence (default: the trace's mean "
                     "prompt plus output tokens)" for cmd in (TRACE, ROUTE, FLEET)}),
    Option("engine-config", TEXT, "the engine's own offload settings: vLLM's "
           "--kv-transfer-config JSON, an LMCache YAML file or a file of SGLang's server flags; "
           "sets the engine profile (with its chunk or page size and single-copy settings) and, "
           "for tiers and trace, the host DRAM and drives it caches in (instead of --engine)",
           COMMANDS, metavar="FILE", path="file", field=None),
    Option("host-cache-bytes", HOST_BYTES, "host DRAM the engine caches KV in, for the node "
           "(default: --engine-config's size, else the node's whole DRAM)", (TIERS, TRACE, ROUTE, FLEET),
           unit="B", metavar="B"),
    Option("disk-cache-bytes", DISK_BYTES, "drive capacity the engine caches KV in, for the node; "
           "0: no NVMe tier (default: --engine-config's, else the node's whole drives)",
           (TIERS, TRACE, ROUTE, FLEET), unit="B", metavar="B"),
    Option("writes-within-rating", FLAG, "admit to NVMe only the writes the drives' rated "
           "endurance allows", (TIERS,), default=False),
    Option("codec", TEXT, "a KV codec the cache moves encoded in: bundled name (codecs.csv: "
           "cachegen) or path to a codecs CSV row; each hop carries 1/ratio of the bytes and the "
           "GPU decodes them at the codec's measured rate (16-bit KV only); reuse: the tier "
           "also holds and writes 1/ratio of the bytes", (COMPARE, REUSE), path=True, row="codecs"),
    Option("pool", TEXT, "a KV store shared by several GPU nodes: bundled name (pools.csv: "
           "mooncake-store-dram, 3fs-nvme, lustre-gcp) or path to a pools CSV row; compare and "
           "reuse reload from it (instead of --tier), tiers puts it below the node's tiers",
           (COMPARE, REUSE, TIERS, FLEET), path=True, row="pools",
           help_for={FLEET: "a KV store below every node's tiers, shared by the fleet's --nodes "
                     "and written as --pool-writes says: bundled name (pools.csv) or path to a "
                     "pools CSV row; with --max-nodes the fleet is also sized without it"}),
    Option("pool-nodes", NODES, "GPU nodes sharing the pool, whose reloads split its "
           "servers' media and NICs (default: --nodes when given, else the pool row's "
           "gpu_nodes)", (COMPARE, REUSE, TIERS),
           metavar="N"),
    Option("pool-writes", choice("through", "back"), "through: every offload is also written to "
           "the pool, which serves the returns the node's tiers miss (LMCache writes each chunk "
           "to every backend); back: a cache reaches the pool when it ages out of the node's "
           "tiers (default through)", (TIERS, FLEET), default="through", needs="pool",
           help_for={FLEET: "through: every request's new blocks are also written to the pool, "
                     "which serves what a node's own tiers miss (LMCache writes each chunk to "
                     "every backend); back: a block reaches the pool when its node lets it go "
                     "(evicted from the node's last tier, no copy left in the node: HiCache's "
                     "write_back), so it serves only what the nodes evicted (default through)"}),
    Option("writes", choice("back", "through"), "how the node's offload tiers are written: back "
           "(a block reaches host DRAM when HBM evicts it, the drives when DRAM does: vLLM's "
           "offloading connector, SGLang HiCache's write_back) or through (every new block "
           "written at once to every offload tier that lacks it: LMCache, HiCache's "
           "write_through); either way a block a tier holds is not written again (default back)",
           (TIERS, TRACE, FLEET), default="back"),
    Option("nodes", NODES, "GPU nodes the router spreads conversations over: the node's "
           "own tiers serve only the returns routed back to it (default 1)", (REUSE, TIERS, ROUTE, FLEET),
           metavar="N", default=1, required=(ROUTE, FLEET),
           help_for={ROUTE: "GPU nodes of the fleet the trace is routed over",
                     FLEET: "GPU nodes of the fleet the trace is routed over"}),
    Option("router", choice(*ROUTERS), "routing policy over --nodes: random and round-robin reach "
           "the cache's node 1 time in N; affinity and kv-aware reach it (an assumption: the "
           "holder has room; kvmath route measures it on a trace) (default kv-aware)",
           (REUSE, TIERS, FLEET), default="kv-aware", needs="nodes",
           help_for={FLEET: "routing policy of the fleet (default kv-aware)"}),
    Option("dask", TEXT, "where the nodes' replays run: 'local' (a local Dask cluster of this "
           "machine's cores, the default), a Dask scheduler's address such as tcp://host:8786 "
           f"(refused if it does not answer within {DASK_TIMEOUT_S} s), or 'none' (threads in "
           "this process, no Dask: the same answer)", (FLEET,), metavar="ADDRESS",
           default="local", field=None),
    Option("max-nodes", NODES, "also find the fewest nodes, up to this many, whose every "
           "node's prefill and decode demand fit its GPUs", (FLEET,), metavar="N"),
    Option("slo-ttft-p99", SECONDS, "with --max-nodes, the fewest nodes must also keep the "
           "fleet's 99th-percentile time to first token within this", (FLEET,), unit="s",
           metavar="S"),
    Option("reach", FRACTION, "probability a returning conversation reaches the node holding its "
           "cache, stated (a what-if, instead of --router's)", (REUSE, TIERS), metavar="H",
           label="returns reaching the cache's node (0–1)"),
    Option("turn-new-tokens", TURN_TOKENS, "tokens a returning turn adds to its cache (new prompt "
           "and output), all the engine writes where the tier still holds the rest (default: "
           "plan_defaults.csv's, measured on the conversation trace)", (REUSE, TIERS),
           unit="tokens", metavar="TOKENS", label="tokens a returning turn adds"),
    Option("policy", choice(*POLICIES), "tier policy (default lru)", (TRACE,), default="lru"),
    Option("ttl", SECONDS, "time-to-live of offloaded blocks for --policy ttl, s (default 600)",
           (TRACE,), unit="s", metavar="S", default=600.0, needs="policy=ttl"),
    Option("min-uses", USES, "uses before a block is written to NVMe, --policy "
           "selective (default 2)", (TRACE,), metavar="N", default=2,
           needs="policy=selective"),
    Option("policies", FLAG, "also compare LRU with ARC, S3-FIFO and the Belady bound "
           "(libCacheSim): the block hit ratio of an object cache of each policy at the "
           "capacities of the node's tiers added up (HBM, then HBM and host DRAM, ...), fed "
           "every block access head first, beside kvmath's own prefix LRU", (TRACE,), field=None,
           excludes=("sample-rate",),
           excludes_why="ARC, S3-FIFO and Belady need every block access: a SHARDS sample "
           "scales to LRU's hit rate alone (drop --sample-rate to compare policies)"),
    Option("remote-bytes", POOL_BYTES, "add a remote pool of this many bytes over RDMA", (TRACE,),
           unit="B", metavar="B"),
    Option("sample-rate", SAMPLE, "answer from a SHARDS sample of the trace's blocks at this "
           "rate, taken as the file is read: the LRU hit-rate curve and the hit rates of one LRU "
           "of the node's tiers' capacity, without the reuse statistics and the tier replay, "
           "which need every block (0 < R < 1; default: the whole trace)", (TRACE,),
           metavar="R", excludes=("policy", "ttl", "min-uses", "writes"),
           excludes_why="a sample answers with the LRU curve alone, and the tier replay this "
           "option sets needs every block access (drop --sample-rate for the replay)"),
)

# ------------------------------------------------------------------ the fleet as engines run it
#: the fleet's engine, router and workload options (issue 35)
RATE_SCALE = bounded("times the trace's rate", 1e-6, 1e6, "from a millionth to a million times "
                     "the trace's arrival rate")
THINK_S = bounded("seconds", 0, 1e9, "from 0 to 1e9 s (SECONDS' bound)")
USERS = bounded("users", 1, 10 ** 7, "at most ten million users in a closed loop", integer=True)
SEED = bounded("seed", 0, 2 ** 32 - 1, "a 32-bit seed (numpy's)", integer=True)
NODE_GPUS = bounded("GPUs", 1, 72, "at most 72 GPUs: nodes.csv gpus' bound (an NVL72 rack)",
                    integer=True)
_SERVE = (TRACE, ROUTE, FLEET)
OPTIONS = OPTIONS + (
    Option("scheduler", choice(*SCHEDULERS), "the engine's scheduler as the fleet simulates it, "
           "by version (kvmath/scenario/schedulers.py gives each default and its source): "
           "vllm-v0.11, vllm-v0.22 (admits a request only when its whole prompt fits), "
           "vllm-v0.30 (the default), sglang-v0.5 (prefill or decode steps)", _SERVE,
           metavar="NAME"),
    Option("max-num-batched-tokens", TOKENS, "tokens a step at most (vLLM's "
           "max_num_batched_tokens, SGLang's chunked_prefill_size; default: the scheduler's for "
           "the GPU, 8192 on an H100)", _SERVE, unit="tokens", metavar="N"),
    Option("max-num-seqs", SEQUENCES, "running requests a replica holds at most (vLLM's "
           "max_num_seqs; default: the scheduler's for the GPU, 1024 on an H100)", _SERVE,
           metavar="N"),
    Option("kv-capacity", TOKENS, "tokens of KV each replica holds in HBM, as the engine "
           "reports it (default: what --gpu-memory-utilization of the HBM leaves after the "
           "weights and the activation reserve)", _SERVE, unit="tokens", metavar="TOKENS"),
    Option("router-param", TEXT, "a router parameter, NAME=VALUE (repeatable; each router's "
           "parameters and deployed defaults: kvmath/fleet/routers/*.py, 'kvmath list "
           "routers')", (ROUTE, FLEET), metavar="NAME=VALUE", repeat=True),
    Option("slo", TEXT, "an objective METRIC:STAT:SECONDS, METRIC ttft, tpot or e2e, STAT mean "
           "or pN (repeatable: ttft:p90:2 tpot:p99:0.05); with --max-nodes the fewest nodes "
           "must meet every one", (FLEET,), metavar="M:S:SECONDS", repeat=True),
    Option("percentiles", TEXT, "the percentiles every latency is given at, comma-separated "
           "(default 50,90,99)", (FLEET,), metavar="P,P,...", field=None),
    Option("window-s", SECONDS, "also give the latencies and throughput per window of this "
           "many seconds of arrivals", (FLEET,), unit="s", metavar="S", field=None),
    Option("rate-scale", RATE_SCALE, "scale the trace's load: arrivals come this many times as "
           "fast (its timestamps divided by it; default 1)", _SERVE, metavar="K", default=1.0),
    Option("users", USERS, "a closed loop instead of the trace's times: this many users, "
           "each sending a session's turns (the trace's chains of turns) one after another, "
           "the next a --think-time after the last one's answer, then the next session",
           (ROUTE, FLEET), metavar="N"),
    Option("think-time", THINK_S, "closed loop: seconds a user waits after an answer "
           "(default 0)", (ROUTE, FLEET), unit="s", metavar="S", needs="users"),
    Option("think-exponential", FLAG, "closed loop: think times exponential with mean "
           "--think-time (default: constant)", (ROUTE, FLEET), needs="users"),
    Option("seed", SEED, "the seed of the random router and the closed loop's think times "
           "(default 0)", (ROUTE, FLEET), metavar="N", default=0),
    Option("node-gpus", NODE_GPUS, "a slice of the node as the node: this many of its GPUs "
           "with their share of its host DRAM, drives and NICs (a rack slice of a GB200 or "
           "GB300 NVL72: --node gb200-nvl72 --node-gpus 8)", (TIERS, TRACE, ROUTE, FLEET),
           unit="GPUs", metavar="N"),
)
BY_NAME = {o.name: o for o in OPTIONS}


BY_KEY = {o.key: o for o in OPTIONS}


def of(command: str):
    """The options ``command`` takes, in declaration order."""
    return tuple(o for o in OPTIONS if command in o.commands)


def keys(command: str) -> tuple:
    """The scenario keys ``command`` reads."""
    return tuple(o.key for o in of(command) if o.toml)


def _argparse_type(kind):
    def parse(text):
        try:
            return kind.from_text(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


def add_options(parser, command: str):
    """Add ``command``'s options to an argparse parser; every default is None, so a scenario
    file can fill what the line leaves unset (:func:`apply_defaults` then fills the rest)."""
    parser.add_argument("--scenario", metavar="FILE.toml",
                        help="a TOML file of these options (keys with _ for -); flags override it")
    for o in of(command):
        flag = "--" + o.name
        if o.repeat:
            parser.add_argument(flag, action="append", type=_argparse_type(o.kind),
                                metavar=o.metavar, help=o.help_of(command))
        elif o.kind.flag:
            parser.add_argument(flag, action="store_true", default=None, help=o.help_of(command))
        elif o.kind.choices:
            parser.add_argument(flag, choices=o.kind.choices, metavar=o.metavar,
                                help=o.help_of(command))
        else:
            parser.add_argument(flag, type=_argparse_type(o.kind), metavar=o.metavar,
                                help=o.help_of(command))
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def apply_defaults(args, command: str):
    """Fill each of ``command``'s options still unset (None) with its declared default."""
    for o in of(command):
        if getattr(args, o.key, None) is None and o.default is not None:
            setattr(args, o.key, o.default)
    return args


def needless(args, command: str):
    """The first option of ``command`` given (on the line or in the file) without the option
    it needs, or None."""
    for o in of(command):
        if not o.needs or getattr(args, o.key, None) is None:
            continue
        name, _, value = o.needs.partition("=")
        given = getattr(args, name.replace("-", "_"), None)
        if given is None or (value and given != value):
            return o
    return None


def excluded(args, command: str):
    """(the option given, the option it means nothing beside) for the first such pair of
    ``command``'s options given (on the line or in the file), or None."""
    for o in of(command):
        if not o.excludes or getattr(args, o.key, None) in (None, False):  # False: a flag off
            continue
        for name in o.excludes:
            if getattr(args, name.replace("-", "_"), None) not in (None, False):
                return BY_NAME[name], o
    return None


def excluded_message(pair) -> str:
    """The refusal of an option given beside one that leaves it out."""
    alone, beside = pair
    return f"--{alone.name} means nothing with --{beside.name}: {beside.excludes_why}"


def needs_message(o) -> str:
    """The refusal of option ``o`` given without what it needs."""
    name, _, value = o.needs.partition("=")
    wanted = f"--{name} {value}" if value else f"--{name}"
    return f"--{o.name} needs {wanted}: without it the option has nothing to act on"


def missing(args, command: str):
    """The first required option of ``command`` that args leaves unset (and no option it
    names in ``required_unless`` stands in for), or None."""
    for o in of(command):
        if command in o.required and getattr(args, o.key, None) is None and not (
                o.required_unless and getattr(args, o.required_unless.replace("-", "_"), None)):
            return o
    return None


def required_message(o: Option) -> str:
    return (f"--{o.name} is required (on the command line or as key '{o.key}' in a "
            "--scenario file)")


def check_toml(key: str, value):
    """A scenario file's value for ``key``, checked; ValueError saying what was expected (an
    option given any number of times takes one value or a list of them)."""
    o = BY_KEY[key]
    if o.repeat:
        values = value if isinstance(value, list) else [value]
        return [o.kind.from_toml(v) for v in values]
    return o.kind.from_toml(value)


def calculator_options():
    """The calculator's fields: {name: {key, label, unit, integer, minimum, maximum, below_max,
    choices, flag}} in form order, with the command line's bounds (key: the option's name in a
    scenario file and among compare's arguments)."""
    out = {}
    for o in OPTIONS:
        if o.label is None:
            continue
        k = o.kind
        out[o.name] = {"key": o.key, "field": o.record_field, "scale": o.scale, "row": o.row,
                       "label": o.label, "unit": o.unit, "integer": k.integer,
                       "minimum": k.minimum, "maximum": k.maximum, "below_max": k.below_max,
                       "words": k.words, "choices": list(k.choices), "flag": k.flag,
                       "text": k.text, "commands": list(o.commands)}
    return out
