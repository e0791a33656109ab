"""Sparse attention (DeepSeek-V3.2's DSA) and chunked-local attention (Llama 4), by hand: the
bytes a prefix holds and the FLOPs its prefill costs, from the config fields alone."""
import pytest

from kvmath import resolve_gpu, resolve_model, resolve_tier
from kvmath.evaluate.api import architecture_values, compare, fn

DSA = resolve_model("deepseek-v3.2")
SCOUT = resolve_model("llama-4-scout")
H200 = resolve_gpu("h200")


def test_dsa_caches_the_latent_and_the_indexer_keys():
    """61 layers x (576 latent elements in bf16 + the indexer's 128 FP8 keys and one FP32 scale:
    132 bytes) per token, one copy (vLLM: 1152 + 132 bytes per token and layer)."""
    v = architecture_values(DSA)
    assert fn("kv_bytes_per_token").take(v) == 61 * (576 * 2 + 128 + 4) == 78_324
    r = compare(DSA, H200, resolve_tier("host-dram"), 32768, tp=8)
    assert r["kv_bytes_unique"] == 78_324 * 32768
    assert r["kv_replication"] == 8  # latent and indexer keys whole on every rank


def pairs(t, k=None):
    """Causal query-key pairs, each query seeing at most k keys."""
    k = t if k is None else min(k, t)
    return k * (k + 1) // 2 + (t - k) * k


@pytest.mark.parametrize("t", [1000, 2048, 10_000, 100_000])
def test_dsa_attention_is_dense_mha_up_to_topk_then_sparse_mqa(t):
    """Up to 2048 tokens a prefill attends densely in MLA's MHA mode (qk 192, v 128 per head);
    beyond, each query its 2048 best keys in MQA mode over the latent (qk 576, v 512); the
    indexer scores every causal pair with 64 heads of 128 either way."""
    v = {**architecture_values(DSA), "T": float(t)}
    heads, layers = 128, 61
    if t <= 2048:
        attention = 2 * heads * (192 + 128) * layers * pairs(t)
    else:
        attention = 2 * heads * (576 + 512) * layers * pairs(t, 2048)
    indexer = 2 * 64 * 128 * layers * pairs(t)
    assert fn("flops_attention").take(v) == pytest.approx(attention + indexer, rel=1e-12)


def test_sparse_attention_grows_linearly_past_topk():
    """Past the top-k the attention per added token is constant and the indexer's grows: the
    recompute of a long prefix costs far less than DeepSeek-V3's dense MLA."""
    v3 = resolve_model("deepseek-v3")
    a = compare(DSA, H200, resolve_tier("host-dram"), 131072, tp=8)["prefill_flops"]
    b = compare(v3, H200, resolve_tier("host-dram"), 131072, tp=8)["prefill_flops"]
    assert a < 0.6 * b


def test_chunked_layers_hold_one_chunk_and_attend_within_it():
    """Llama 4 Scout: 12 global layers hold every token, 36 chunked-local layers the last 8192
    (vLLM's offloading connector looks back one chunk), each 2 x 8 KV heads x 128 x 2 bytes;
    a chunked layer's query sees the earlier tokens of its own chunk only."""
    t = 20_000
    v = {**architecture_values(SCOUT), "T": float(t)}
    per_layer = 2 * 8 * 128 * 2
    assert fn("kv_bytes_attention").take(v) == per_layer * (12 * t + 36 * 8192)
    whole, rest = divmod(t, 8192)
    chunk_pairs = whole * 8192 * 8193 // 2 + rest * (rest + 1) // 2
    want = 2 * 40 * (128 + 128) * (12 * pairs(t) + 36 * chunk_pairs)
    assert fn("flops_attention").take(v) == pytest.approx(want, rel=1e-12)


def test_a_sparse_models_crossings_are_found_numerically():
    """A DSA model's reload-minus-recompute is not a piecewise quadratic: compare still finds
    where the times to first token cross (the flat model's tornado too)."""
    from kvmath.evaluate.bands import tornado
    base, _ = tornado(DSA, H200, resolve_tier("nvme-1drive"), 32768, output="crossing")
    r = compare(DSA, H200, resolve_tier("nvme-1drive"), 32768)
    assert base > 0 and all(x > 2 for x in r["breakeven_tokens"])


@pytest.mark.parametrize("field,value,what", [
    ("index_topk", "", "index_topk"), ("aux_kv_dtype", "fp9", "aux_kv_dtype"),
    ("chunk_tokens", "", "chunk_tokens")])
def test_a_model_row_that_does_not_add_up_is_refused(tmp_path, field, value, what):
    """A DSA row without its top-k, with an unknown index format, or a chunked row without its
    chunk: one line naming the file and field, exit 2."""
    import csv
    import subprocess
    import sys
    from kvmath.tables.schema import data_path
    rows = {r["name"]: r for r in csv.DictReader(open(data_path("models.csv")))}
    row = dict(rows["deepseek-v3.2" if field != "chunk_tokens" else "llama-4-scout"])
    row["name"], row[field] = "mine", value
    path = tmp_path / "mine.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(row))
        w.writeheader()
        w.writerow(row)
    p = subprocess.run([sys.executable, "-m", "kvmath", "compare", "--model", str(path), "--gpu",
                        "h200", "--tier", "host-dram", "--tokens", "4096"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert str(path) in p.stderr and what in p.stderr
