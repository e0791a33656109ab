"""A decode step at a batch (kvmath.derive.serving.t_decode_step): the prefill model's forward of
one token per sequence, then their attention reading each sequence's KV once, never under the
roofline of the weights the batch touches, and never over reading every weight once plus the
KV and the forward's own fixed costs."""
import math

import pytest
from hypothesis import given, settings, strategies as st

from kvmath.evaluate.serving import decode_cost
from kvmath.evaluate.validation import alone, decode_step, measurements
from kvmath.evaluate.api import scenario_values
from kvmath.tables.rows import bundled, model_of

CAT = bundled()


def total_params(m, g, tp):
    return scenario_values(m, g, CAT.tiers["host-dram"], tp=tp)[0]["N_tot"]
CASES = [("llama-3.1-70b", "h100-sxm", 4), ("deepseek-v3", "h200", 8),
         ("gpt-oss-120b", "h100-sxm", 8), ("mixtral-8x7b", "a100-sxm", 2)]


def test_a_dense_models_roofline_is_its_weights_and_kv_read_once():
    """Llama-3.1-70B on 4 H100s at batch 8 and 4,096 tokens, by hand: every weight but the input
    embedding (a step looks up one row of it per sequence; bf16, a quarter per GPU) and 8
    sequences' KV (80 layers x 8 KV heads x 128 x 2 x 2 B per token, 2 heads per GPU) once at
    the measured HBM rate; the compute is far below it."""
    m, g = CAT.models["llama-3.1-70b"], CAT.gpus["h100-sxm"]
    r = decode_cost(m, g, 4, 8, 4096)
    weights = (total_params(m, g, 4) - m.vocab_size * m.hidden_size) * 2 / 4
    kv = 8 * 4096 * 80 * 2 * 8 * 128 * 2 / 4
    assert r["decode_roofline_step_s"] == pytest.approx(
        (weights + kv) / (g.hbm_bandwidth_Bps * g.hbm_efficiency), rel=1e-12)
    assert r["decode_step_s"] >= r["decode_roofline_step_s"]


def test_a_moe_batch_reads_the_experts_it_touches():
    """DeepSeek-V3 at batch 1 reads 8 of 256 routed experts' weights; at a batch of 512 nearly
    all of them (1 - (1 - 8/256)^512 of each layer's)."""
    m, g = CAT.models["deepseek-v3"], CAT.gpus["h200"]
    one = decode_cost(m, g, 8, 1, 1)["decode_roofline_step_s"]
    big = decode_cost(m, g, 8, 512, 1)["decode_roofline_step_s"]
    every = ((total_params(m, g, 8) - m.vocab_size * m.hidden_size) * 1 / 8  # FP8 weights
             / (g.hbm_bandwidth_Bps * g.hbm_efficiency))
    assert one < every / 10 and big == pytest.approx(every, rel=0.05) and big >= every * 0.95


@pytest.mark.parametrize("row", [r for r in measurements()
                                 if r.quantity == "decode_step_s" and r.batch == 1
                                 and not r.kv_dtype], ids=lambda r: r.id)
def test_a_batch_of_one_is_the_reloads_one_token_step(row):
    """At batch 1 the decode step is the engine step a reload pays for one new token (compare's
    reload_step_s on the hbm tier, the decode validation rows' prediction), to within the KV
    read that step charges on top of its forward (t_suffix's second branch)."""
    m = model_of(row.model)
    r = decode_cost(m, CAT.gpus[row.gpu], row.tp, 1, row.tokens,
                    compute_dtype=row.compute_dtype or None,
                    ep=row.ep if row.ep and row.ep > 1 else None, engine=alone(None, row.kernels))
    assert r["decode_step_s"] == pytest.approx(decode_step(row), rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(case=st.sampled_from(CASES), batch=st.integers(1, 512), tokens=st.integers(1, 100_000))
def test_physics_bounds_a_decode_step(case, batch, tokens):
    name, gpu, tp = case
    m, g = CAT.models[name], CAT.gpus[gpu]
    r = decode_cost(m, g, tp, batch, tokens)
    assert math.isfinite(r["decode_step_s"]) and r["decode_step_s"] > 0
    assert r["decode_step_s"] >= r["decode_roofline_step_s"]
    # per token, a larger batch never costs more: the weights are shared by more tokens
    more = decode_cost(m, g, tp, batch + 1, tokens)
    assert more["decode_gpu_s_per_token"] <= r["decode_gpu_s_per_token"] * (1 + 1e-9)
    assert more["decode_step_s"] >= r["decode_step_s"] * (1 - 1e-9)


@pytest.mark.parametrize("batch", [0, -1, 2.5, float("nan")])
def test_a_decode_batch_is_a_positive_whole_number(batch):
    from kvmath.evaluate.api import ScenarioError
    with pytest.raises(ScenarioError, match="positive whole number"):
        decode_cost(CAT.models["llama-3.1-70b"], CAT.gpus["h100-sxm"], 4, batch, 100)


@pytest.mark.parametrize("row", [r for r in measurements()
                                 if r.quantity == "decode_step_s" and r.batch > 1],
                         ids=lambda r: r.id)
def test_a_batched_rows_prediction_is_the_fleets_decode_step(row):
    """A batched decode row is predicted by the step the fleet charges, in the row's formats."""
    r = decode_cost(model_of(row.model), CAT.gpus[row.gpu], row.tp, row.batch, row.tokens,
                    compute_dtype=row.compute_dtype or None, kv_dtype=row.kv_dtype or None,
                    engine=alone(None, row.kernels))
    assert decode_step(row) == pytest.approx(r["decode_step_s"], rel=1e-12)
    assert r["decode_step_s"] >= r["decode_roofline_step_s"]


def test_an_fp8_kv_cache_halves_the_kv_a_step_reads():
    m, g = CAT.models["llama-2-7b"], CAT.gpus["h100-sxm"]
    bf16 = decode_cost(m, g, 1, 120, 1152, compute_dtype="fp8")
    fp8 = decode_cost(m, g, 1, 120, 1152, compute_dtype="fp8", kv_dtype="fp8")
    kv = 120 * 1152 * 32 * 2 * 32 * 128 * 2  # batch x tokens x layers x K,V x heads x dim x 2 B
    assert bf16["decode_step_s"] - fp8["decode_step_s"] == pytest.approx(
        kv / 2 / (g.hbm_bandwidth_Bps * g.hbm_efficiency), rel=1e-9)


def test_a_failing_batched_row_does_not_widen_a_reloads_step_band():
    """A reload's band carries a failing batch-1 decode row (its own one-token step), never a
    batched one: Mistral-7B on one H100 fails only at batch 120 (a TensorRT-LLM step)."""
    from kvmath.evaluate.bands import known_limits
    from kvmath.evaluate.api import compare
    failing = [r for r in measurements() if r.id == "trtllm-mistral-h100-bs120"]
    assert failing and all(r.expect == "fail" and r.batch > 1 for r in failing)
    r = compare(CAT.models["mistral-7b"], CAT.gpus["h100-sxm"], CAT.tiers["host-dram"], 8192, tp=1)
    assert not [m for m, _ in known_limits(CAT.models["mistral-7b"], "h100-sxm", r)
                if m.quantity == "decode_step_s"]
