"""The fleet's step-level scheduler (issue 35) on cases worked by hand: each replica's steps as
vLLM V1 and SGLang build them, its KV block by block, preemption, loads from the tiers below,
the routers' choices, closed loops and load ladders. The step time is made simple here
(10 ms plus 1 ms a token) so each time can be written down; the calibrated tables are held to
the decode step and the prefill they compose (test_step_tables_compose_the_decode_step)."""
import numpy as np
import pytest

from kvmath.fleet.serving import _no_stages
from kvmath.traces.simulate.engine import DONE, REFUSED, Engine, Reqs, Steps, Tiers
from kvmath.traces.simulate.serve import Load, Route, simulate

BT = 16
STEP = Steps(lin=0.010 + 0.001 * np.arange(20000.0), floor=np.zeros(20000),
             attn=np.zeros(10), kvread=np.zeros(10), grid=10 ** 6)


def step(n):
    """The test's step time of n tokens, s."""
    return 0.010 + 0.001 * n


def engine(**kw):
    base = dict(policy=0, budget=64, max_seqs=1024, kv_cap=10 ** 6, full_isl=False,
                load_overlap=False, ratio_init=0.7, ratio_min=0.098, ratio_decay=0.001,
                clip_new=4096)
    return Engine(**{**base, **kw})


def tiers(replicas=1, per_node=1, cap=(), reload=None, through=False):
    nmax = 64
    return Tiers(replicas=replicas, per_node=per_node, nodes=replicas // per_node, bt=BT,
                 cap=np.array(cap, np.int64), pool_cap=0, through=through, pool_back=False,
                 reload=np.zeros((max(len(cap), 1), nmax + 1)) if reload is None else reload)


def reqs(prompts, outputs, hashes):
    nb = np.array([len(h) for h in hashes], np.int64)
    off = np.r_[0, np.cumsum(nb)].astype(np.int64)
    flat = np.array([x for h in hashes for x in h], np.uint64)
    return Reqs(np.array(prompts, np.int64), np.array(outputs, np.int64), nb, off, flat)


def route(code=1, n=1, w=(), **kw):
    v = np.zeros(8)
    v[:len(w)] = w
    base = dict(code=code, w=v, idx_cap=0, idx_match=1, ring=np.zeros(1, np.uint64),
                owner=np.zeros(1, np.int64), key=np.zeros(max(n, 1), np.uint64),
                parent=np.full(max(n, 1), -1, np.int64), rng=np.array([7], np.uint64))
    return Route(**{**base, **kw})


def open_loop(ts):
    return Load(ts=np.asarray(ts, float), users=0, think=0.0, think_exp=False,
                heads=np.zeros(0, np.int64), child=np.zeros(0, np.int64),
                rng=np.array([1], np.uint64), **_no_stages())


def run(r, eng=None, tr=None, rt=None, load=None, refused=None):
    n = len(r.prompt)
    return simulate(r, eng or engine(), STEP, tr or tiers(), rt or route(n=n),
                    load or open_loop(np.zeros(n)),
                    np.zeros(n, np.int8) if refused is None else refused)


def blocks(start, count):
    return list(range(start, start + count))


def test_one_request_chunks_its_prompt_then_decodes():
    """100 prompt tokens at 64 a step: two steps (64, then 36 and the first token), then a
    decode step a token (the last output token needs no step of its own after it)."""
    tm, replica, status, sums, _ = run(reqs([100], [4], [blocks(1, 6)]))
    assert status[0] == DONE and replica[0] == 0
    ttft = step(64) + step(36)
    assert tm.first[0] == pytest.approx(ttft)
    assert tm.done[0] == pytest.approx(ttft + 3 * step(1))
    assert sums[0, 1] == 5 and sums[0, 4] == 4  # steps, tokens out


def test_running_decodes_share_a_step_with_a_prompt_chunk():
    """vLLM V1 has no phases: a running decode takes 1 token of the budget and a new prompt the
    rest of it, in the same step."""
    r = reqs([20, 100], [10, 2], [blocks(1, 1), blocks(100, 6)])
    tm, *_ = run(r, load=open_loop([0.0, 0.05]))
    # request 0: one step of 20 tokens (its first token at 0.030), then decodes of 1 token;
    # request 1 arrives at 0.05, during the decode step 0.030-0.041; from 0.041 each step is
    # request 0's decode plus a chunk of 63, then 37
    assert tm.first[0] == pytest.approx(step(20))
    t1 = step(20) + step(1)
    assert tm.first[1] == pytest.approx(t1 + step(1) + step(64) + step(38))


def test_a_shared_prefix_is_found_in_hbm_and_not_recomputed():
    """A second request repeating the first's prompt blocks finds them cached once the first
    computed them: it computes only its own tokens (a full hit recomputes its last token)."""
    r = reqs([64, 80], [1, 1], [blocks(1, 4), blocks(1, 4) + [99]])
    tm, *_ = run(r, load=open_loop([0.0, 1.0]))
    assert tm.hit[1] == 4 and tm.hit[0] == 0
    assert tm.first[1] - 1.0 == pytest.approx(step(16))  # 80 - 4 x 16 tokens


def test_a_full_hit_recomputes_its_last_block():
    r = reqs([64, 64], [1, 1], [blocks(1, 4), blocks(1, 4)])
    tm, *_ = run(r, load=open_loop([0.0, 1.0]))
    assert tm.hit[1] == 3 and tm.first[1] - 1.0 == pytest.approx(step(16))


def test_kv_full_preempts_the_last_admitted_which_recomputes():
    """Two requests whose outputs outgrow a KV of 60 tokens: the later admitted is preempted
    (its computed tokens forgotten), waits at the head of the queue and recomputes once the
    first is done; both finish."""
    r = reqs([20, 20], [20, 20], [blocks(1, 1), blocks(50, 1)])
    tm, _, status, sums, _ = run(r, eng=engine(kv_cap=60))
    assert (status == DONE).all()
    assert tm.preempted[1] >= 1 and tm.preempted[0] == 0
    assert tm.done[1] > tm.done[0]


def test_the_whole_prompt_must_fit_from_vllm_0_22():
    """A 50-token prompt beside a running request holding 20 of a 60-token KV: vLLM 0.11 admits
    its first 16-token chunk (budget 16), vLLM 0.22 waits until the whole prompt fits."""
    r = reqs([20, 50], [30, 1], [blocks(1, 1), blocks(100, 3)])
    load = open_loop([0.0, 0.05])
    old, *_ = run(r, eng=engine(kv_cap=60, budget=16), load=load)
    new, *_ = run(r, eng=engine(kv_cap=60, budget=16, full_isl=True), load=load)
    assert new.admitted[1] >= new.done[0] - 1e-12
    assert old.admitted[1] < old.done[0]


def test_max_num_seqs_holds_the_queue():
    r = reqs([10, 10], [5, 5], [[], []])
    tm, *_ = run(r, eng=engine(max_seqs=1))
    assert tm.admitted[1] == pytest.approx(tm.done[0])


def test_a_request_too_large_for_the_kv_is_refused_not_queued():
    r = reqs([10, 100], [1, 1], [[], []])
    refused = np.array([0, 1], np.int8)
    tm, _, status, *_ = run(r, refused=refused)
    assert status[1] == REFUSED and status[0] == DONE


def test_a_load_from_the_tier_below_is_waited_for_holding_no_budget():
    """A prefix evicted from HBM to the host tier is loaded back: the request waits for the load
    (vLLM's connector), then computes only the rest."""
    reload = np.zeros((1, 65))
    reload[0, 3] = 0.5  # three blocks take 0.5 s
    r = reqs([64, 64, 80], [1, 1, 1], [blocks(1, 4), blocks(10, 4), blocks(1, 4) + [99]])
    # KV of 80 tokens: the second prompt evicts three of the first's blocks to the host tier,
    # tails first (its head, freed last, is the most recent)
    tm, *_ = run(r, eng=engine(kv_cap=80), tr=tiers(cap=[100], reload=reload),
                 load=open_loop([0.0, 1.0, 2.0]))
    assert tm.loaded[2] == 3 and tm.hit[2] == 1
    assert tm.first[2] - 2.0 == pytest.approx(0.5 + step(16))


def test_sglang_runs_a_prefill_step_without_the_decodes():
    """SGLang: a step is a prefill batch or a decode step: a new prompt stalls the running
    decode for its step."""
    r = reqs([20, 30], [10, 2], [blocks(1, 1), blocks(100, 2)])
    tm, *_ = run(r, eng=engine(policy=1), load=open_loop([0.0, 0.05]))
    # request 0's prefill, then decode steps ending at 0.041 and 0.052 (request 1 arrives at
    # 0.05, during the second), then request 1's prefill alone
    t = step(20) + 2 * step(1)
    assert tm.first[1] == pytest.approx(t + step(30))


@pytest.mark.parametrize("code", [0, 1, 3])
def test_routers_spread_requests_over_replicas(code):
    n = 40
    r = reqs([10] * n, [50] * n, [[] for _ in range(n)])
    _, replica, *_ = run(r, tr=tiers(replicas=4, per_node=4), rt=route(code=code, n=n),
                         load=open_loop(np.arange(n) * 0.01))
    counts = np.bincount(replica, minlength=4)
    assert counts.sum() == n and (counts > 0).all()
    if code == 1:
        assert list(replica[:8]) == [0, 1, 2, 3, 0, 1, 2, 3]


def test_llm_d_precise_sends_a_prefix_where_it_is_cached():
    """Weights 3:2:2: a prompt whose blocks one replica holds goes there."""
    n = 5
    hs = [blocks(1, 4)] + [blocks(100 * (i + 1), 4) for i in range(3)] + [blocks(1, 4) + [7]]
    r = reqs([64] * 4 + [80], [1] * n, hs)
    _, replica, *_ = run(r, tr=tiers(replicas=4, per_node=4),
                         rt=route(code=5, n=n, w=(3, 2, 2, 1, 0.8)),
                         load=open_loop([0, 0.01, 0.02, 0.03, 2.0]))
    assert replica[4] == replica[0]


def test_chwbl_keeps_a_key_on_its_replica_while_the_load_is_bounded():
    from kvmath.fleet.serving import _mix
    n, R = 20, 4
    pts = _mix(np.arange(R * 256, dtype=np.uint64))
    order = np.argsort(pts)
    rt = route(code=4, n=n, w=(1.25,), ring=pts[order],
               owner=np.repeat(np.arange(R), 256)[order].astype(np.int64),
               key=np.full(n, 12345, np.uint64))
    r = reqs([10] * n, [2] * n, [[] for _ in range(n)])
    _, replica, *_ = run(r, tr=tiers(replicas=R, per_node=R), rt=rt,
                         load=open_loop(np.arange(n) * 10.0))  # one at a time: no load
    assert len(set(replica.tolist())) == 1


def test_a_closed_loop_sends_a_turn_a_think_time_after_the_last_answer():
    r = reqs([10, 20, 10], [3, 3, 3], [[], [], []])
    load = Load(ts=np.zeros(0), users=1, think=2.0, think_exp=False,
                heads=np.array([0, 2], np.int64), child=np.array([1, -1, -1], np.int64),
                rng=np.array([1], np.uint64), **_no_stages())
    tm, *_ = run(r, load=load)
    assert tm.sent[0] == 0.0
    assert tm.sent[1] == pytest.approx(tm.done[0] + 2.0)
    assert tm.sent[2] == pytest.approx(tm.done[1] + 2.0)  # the next session after the first


def test_a_load_ladder_starts_a_stage_once_the_last_is_answered():
    r = reqs([10] * 4, [100, 100, 1, 1], [[] for _ in range(4)])
    load = Load(ts=np.array([0.0, 0.0, 0.0, 0.5]), users=0, think=0.0, think_exp=False,
                heads=np.zeros(0, np.int64), child=np.zeros(0, np.int64),
                rng=np.array([1], np.uint64), stage=np.array([0, 0, 1, 1], np.int64),
                stage_dur=np.array([1.0, 1.0]), stage_left=np.array([2, 2], np.int64),
                stage_start=np.zeros(2), interval=1.0)
    tm, *_ = run(r, load=load)
    end0 = max(tm.done[0], tm.done[1])
    assert end0 > 1.0 and tm.sent[2] == pytest.approx(end0 + 1.0)
    assert tm.sent[3] == pytest.approx(end0 + 1.5)


def test_step_tables_compose_the_decode_step():
    """A pure decode step of B sequences at context T on the tables is decode_cost's
    t_decode_step within 5 %, and a lone prefill is the calibrated prefill."""
    from dataclasses import replace
    from kvmath.evaluate.api import choose_layout
    from kvmath.evaluate.prefill import prefill_time
    from kvmath.evaluate.serving import decode_cost
    from kvmath.evaluate.steps import step_tables, step_time
    from kvmath.tables.rows import bundled
    cat = bundled()
    model, gpu = cat.models["qwen3-32b"], replace(cat.gpus["h100-sxm"], gpus_per_node=8)
    layout = choose_layout(model, gpu, tp=2, check_fit=False)
    tables = step_tables(model, gpu, layout, 9216, 40000)
    for b, t in ((1, 1000), (32, 4000), (128, 8000)):
        want = decode_cost(model, gpu, 2, b, t)["decode_step_s"]
        assert step_time(tables, [], [t] * b) == pytest.approx(want, rel=0.05)
    lone = float(prefill_time(model, gpu, 8192.0, tp=2)["total_s"])
    assert step_time(tables, [(0, 8192)], []) == pytest.approx(lone, rel=0.01)


def test_a_queue_holding_kv_behind_its_head_does_not_stall_the_replica(tmp_path):
    """Found after review: requests queued behind the head of line that had looked up or
    loaded their prefix kept that KV, and together they left the head no room on a replica
    running nothing; the compiled loop then woke the replica at the same time for ever (kvmath
    trace conversation --batch-seqs 200 hung). A request the engine cannot schedule keeps no
    blocks: each such request lets go and looks again, and every request is served or refused.
    The case: the conversation trace's first 365 requests on small replicas (TP 2 with 27,610
    tokens of KV each, what that command's layout gave)."""
    import gzip

    from kvmath.fleet.run import fleet
    from kvmath.tables.schema import data_path
    from kvmath.traces import readers as T
    path = tmp_path / "head.jsonl"
    with gzip.open(data_path("traces") / "conversation_trace.jsonl.gz", "rt") as fh:
        path.write_text("".join(next(fh) for _ in range(365)))
    trace = T.load(str(path))
    a = fleet(trace, "llama-3.1-70b", "dgx-h100", 1, "round-robin", tier_replay=False, tp=2,
              kv_capacity=27610)
    assert a["requests_served"] + a["requests_refused"] == trace.n_requests


def test_an_overloaded_node_with_host_dram_loads_what_it_found():
    """Found after review: a request's lookup found blocks in host DRAM, made room in HBM for
    them (whose evictions, written back, pushed entries out of host DRAM), then touched the
    blocks it had found: one was gone, and the touch wrote through a missing entry (a crash in
    the tier-design chapter, one node serving the conversation trace with HBM and host DRAM).
    The blocks read are touched before the room is made."""
    from kvmath.fleet.run import fleet
    from kvmath.traces import readers as T
    trace = T.load("conversation")
    a = fleet(trace, "llama-3.1-70b", "dgx-h100", 1, "llm-d", tier_replay=False,
              disk_cache_bytes=0)
    assert a["requests_served"] + a["requests_refused"] == trace.n_requests
    assert not a["keeps_up"]  # one node is overloaded: what made the queue hold loads


def test_the_compiled_cache_is_keyed_on_every_module_of_the_simulations():
    """numba checks only a kernel's own file; a callee in another module changed would leave
    the caller's cache stale. The cache directory is named by a hash of every module."""
    from numba.core import config

    from kvmath.traces.simulate import compiled
    import kvmath.traces.simulate.serve  # noqa: F401  (its kernels cached under the key)
    key = compiled.cache_key()
    assert key == compiled.cache_key() and len(key) == 16
    assert f"numba-{key}" in str(config.CACHE_DIR)
