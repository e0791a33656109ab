"""The engines' schedulers as a fleet simulates them: one profile per engine version whose
scheduling defaults differ (:data:`PROFILES`), each default with the source it was read in, and
the settings of a replica (:func:`engine_settings`): the profile's defaults for the GPU, with the
options a user gives (``--max-num-batched-tokens``, ``--max-num-seqs``, ``--kv-capacity``,
``--gpu-memory-utilization``) in their place.

The semantics each policy follows are in :mod:`kvmath.traces.simulate.engine`. Every source was
read on the day in :data:`RETRIEVED`, in the PyPI wheels of the versions named.
"""
from __future__ import annotations

from dataclasses import dataclass

#: when the sources below were read
RETRIEVED = "2026-12-06"
GIB = 2 ** 30

_VLLM_BATCH = ("vllm==0.11.0 wheel, vllm/engine/arg_utils.py:1600-1626 "
               "(EngineArgs._set_default_args: device_memory >= 70 GiB and not an A100: "
               "max_num_batched_tokens 8192 for the OpenAI API server, max_num_seqs 1024; "
               "else 2048 and 256)")
_VLLM_BATCH_30 = ("vllm==0.30.0 wheel, vllm/engine/arg_utils.py:2722-2750 (as 0.11, and "
                  "device_memory >= 160 GiB: 16384 and 1024, 'for GPUs like B200/B300')")
_SGLANG_CHUNK = ("sglang==0.5.23 wheel, sglang/srt/arg_groups/memory_hook.py:88-178 "
                 "(_handle_gpu_memory_settings: chunked_prefill_size 2048 below 20 GiB, 4096 below "
                 "60 GiB, 8192 below 160 GiB, else 16384); enable_mixed_chunk False "
                 "(arg_groups/fields/schedule.py:208); new_token_ratio 0.7, its floor 0.7 x 0.14, "
                 "decayed over 600 steps (srt/environ.py:646-648: SGLANG_INIT_NEW_TOKEN_RATIO, "
                 "SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR, SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS)")


@dataclass(frozen=True)
class Profile:
    """One engine version's scheduling, as the fleet simulates it."""
    name: str
    policy: str  #: "vllm" (V1) or "sglang"
    full_isl: bool  #: admits a request only when its whole prompt fits (vLLM >= 0.22)
    gpu_memory_utilization: float  #: the HBM fraction it sizes weights and KV in
    source: str  #: where each default was read

    def budget(self, gpu):
        """(tokens a step, running requests at most) by default on ``gpu`` (its row)."""
        mem = gpu.hbm_capacity_bytes
        if self.policy == "sglang":
            mib = mem / 2 ** 20
            chunk = (2048 if mib < 20 * 1024 else 4096 if mib < 60 * 1024 else
                     8192 if mib < 160 * 1024 else 16384)
            return chunk, 4096  # max_running_requests: the KV bounds it first (ASSUMED 4096)
        if self.name >= "vllm-v0.30" and mem >= 160 * GIB:
            return 16384, 1024
        if mem >= 70 * GIB and "a100" not in gpu.name:
            return 8192, 1024
        return 2048, 256


#: the profiles by name; the default is the newest vLLM one
PROFILES = {p.name: p for p in (
    Profile("vllm-v0.11", "vllm", False, 0.9,
            f"{_VLLM_BATCH}; gpu_memory_utilization 0.9 (vllm/config/cache.py:43); scheduling "
            "vllm/v1/core/sched/scheduler.py:195-541 (Scheduler.schedule)"),
    Profile("vllm-v0.22", "vllm", True, 0.92,
            f"{_VLLM_BATCH}; vllm==0.22.0 wheel: scheduler_reserve_full_isl True "
            "(vllm/config/scheduler.py:140; vllm/v1/core/kv_cache_manager.py:246-346, "
            "full_sequence_must_fit), gpu_memory_utilization 0.92 (vllm/config/cache.py:66)"),
    Profile("vllm-v0.30", "vllm", True, 0.92,
            f"{_VLLM_BATCH_30}; full_isl and 0.92 as vllm-v0.22"),
    Profile("sglang-v0.5", "sglang", False, 0.9, _SGLANG_CHUNK + "; mem_fraction_static: "
            "ASSUMED 0.9 (SGLang sizes it from its reserved memory, not a fixed fraction)"),
)}
DEFAULT = "vllm-v0.30"
#: SGLang's new_token_ratio: start, floor factor, decay steps (sources in _SGLANG_CHUNK)
SGLANG_RATIO = (0.7, 0.14, 600)
#: SGLang reserves at most this many future output tokens a request (schedule_policy.py
#: CLIP_MAX_NEW_TOKENS, sglang 0.5: 4096)
SGLANG_CLIP = 4096


def profile(name):
    """The profile of that name (a ScenarioError naming the others if none)."""
    from kvmath.logic.runtime import ScenarioError
    if name not in PROFILES:
        raise ScenarioError(f"unknown scheduler {name!r}; expected one of {', '.join(PROFILES)}")
    return PROFILES[name]
