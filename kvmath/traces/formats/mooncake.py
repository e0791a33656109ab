"""**Mooncake JSONL** (the FAST'25 release, bundled as ``conversation`` and ``synthetic``):
``timestamp`` (ms), ``input_length``, ``output_length`` (tokens), ``hash_ids`` (hashes of the
prompt's 512-token prefix blocks, head first). A record holding ``hash_ids`` names the format."""
from kvmath.traces.formats.format import SESSION_ID, Format

#: tokens per prefix block of every Mooncake trace (the format has no field for it)
MOONCAKE_BLOCK_TOKENS = 512
#: the commit of Mooncake's repository the bundled traces were taken from, and where they are
MOONCAKE_COMMIT = "3b5a594133958449a1feaf1c9e0fc1b553e34a28"
MOONCAKE_SOURCE = f"https://github.com/kvcache-ai/Mooncake/tree/{MOONCAKE_COMMIT}/FAST25-release/traces"

FORMAT = Format(
    name="mooncake", named="Mooncake fields",
    fields={"timestamp": ("DOUBLE", "number"), "input_length": ("BIGINT", "integer"),
            "output_length": ("BIGINT", "integer"), "hash_ids": ("UBIGINT[]", "hashes")},
    marker="hash_ids",
    timestamp="timestamp", timestamp_per_s=1000.0,
    prompt="input_length", output="output_length", hashes="hash_ids",
    block_tokens=MOONCAKE_BLOCK_TOKENS,
    refused={"session_id": SESSION_ID},
)
