"""Parameter counts derived from config fields reproduce the vendors' published totals."""
import pytest

from kvmath import resolve_model
from kvmath.evaluate.api import parameter_counts

# (total, active) in billions as published; tolerance 1% because norms and
# biases are ignored and vendors round.
PUBLISHED = {
    "llama-3.1-8b": (8.03, None),  # meta-llama/llama-models sku_list.py
    "llama-3.1-70b": (70.6, None),
    "llama-3.1-405b": (405.9, None),
    "mixtral-8x7b": (46.7, 12.9),  # Mistral AI announcement (46.7B total, 12.9B per token)
    "qwen2.5-72b": (72.7, None),  # Qwen2.5-72B model card
    "qwen2.5-7b": (7.61, None),  # Qwen2.5-7B model card
    "qwen3-235b-a22b": (235, 22),  # Qwen3 release table
    "qwen3-30b-a3b": (30.5, 3.3),
    "deepseek-v3": (671, 37),  # DeepSeek-V3 README (without the 14B MTP module)
    "gpt-oss-120b": (116.83, 5.13),  # gpt-oss model card: active counts the unembedding only
    # DeepSeek-V3.2's Hugging Face card: 685B with the 14B MTP module; no active count published
    "deepseek-v3.2": (671, None),
    # Meta's Llama 4 model card: 17B active, 109B total, the vision encoder (about 1B) included,
    # which the text model here does not count (hence 2%)
    "llama-4-scout": (109, 17, 0.02),
    "gemma-3-27b": (27, None),  # Gemma 3 model card: 27B (the SigLIP encoder not counted)
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_parameter_counts(name):
    total, active, *tol = PUBLISHED[name]
    rel = tol[0] if tol else 0.01
    model = resolve_model(name)
    n_lin, n_tot, _ = parameter_counts(model)
    assert n_tot / 1e9 == pytest.approx(total, rel=rel)
    if active is not None:
        # published "active" counts include the embedding and LM head
        tables = 1 if model.tie_word_embeddings or name == "gpt-oss-120b" else 2
        embed = model.vocab_size * model.hidden_size * tables
        assert (n_lin + embed) / 1e9 == pytest.approx(active, rel=0.03)
