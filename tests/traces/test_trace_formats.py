"""Trace formats are a registry (issue 19): detection, DuckDB's reading, the line-by-line checks
and the compiled JSONL path find a format only in kvmath.traces.formats, so a new format is one
module there (shown here by a format registered in a test, read by every path)."""
import json
import pkgutil

import numpy as np
import pytest

from kvmath.traces import formats, jsonl
from kvmath.traces import readers as T
from kvmath.traces.formats.format import SESSION_ID, Format

#: a format no module declares: microsecond timestamps, a fixed 16-token block, no output field
TINY = Format(
    name="tiny", named="tiny fields",
    fields={"t_us": ("DOUBLE", "number"), "tokens": ("BIGINT", "integer"),
            "blocks": ("UBIGINT[]", "hashes")},
    marker="blocks", timestamp="t_us", timestamp_per_s=1e6, prompt="tokens", hashes="blocks",
    block_tokens=16, refused={"session_id": SESSION_ID})

#: (t_us, tokens, blocks): 40 tokens in 16-token blocks take 2 or 3 hashes
RECORDS = [(0, 40, [1, 2, 3]), (1_500_000, 32, [1, 2]), (2_250_000, 50, [1, 2, 4])]


def write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def tiny_file(tmp_path):
    return write(tmp_path / "tiny.jsonl",
                 [{"t_us": t, "tokens": n, "blocks": b} for t, n, b in RECORDS])


@pytest.fixture
def tiny(monkeypatch):
    """TINY registered for one test, as its module and its name in ORDER would register it."""
    monkeypatch.setitem(formats.FORMATS, "tiny", TINY)
    return TINY


def test_every_format_module_is_registered_in_order():
    modules = sorted(m.name for m in pkgutil.iter_modules(formats.__path__) if m.name != "format")
    assert sorted(formats.ORDER) == modules
    assert list(formats.FORMATS) == list(formats.ORDER) == ["mooncake", "generic"]
    assert formats.parquet() is formats.FORMATS["generic"]


def test_the_registry_says_what_a_file_of_no_format_should_hold(tiny):
    assert formats.unknown() == (
        "unknown format: expected Mooncake fields (timestamp, input_length, output_length, "
        "hash_ids) or generic ones (timestamp_s, prompt_tokens, block_hashes, block_tokens) or "
        "tiny fields (t_us, tokens, blocks)")


def test_an_unregistered_format_is_not_read(tmp_path):
    with pytest.raises(T.TraceError, match="line 1: unknown format: expected Mooncake"):
        T.load(tiny_file(tmp_path))


def check(trace):
    assert trace.block_tokens == 16
    np.testing.assert_array_equal(trace.timestamp_s, [0.0, 1.5, 2.25])
    np.testing.assert_array_equal(trace.prompt_tokens, [40, 32, 50])
    np.testing.assert_array_equal(trace.output_tokens, [0, 0, 0])
    np.testing.assert_array_equal(trace.n_blocks, [3, 2, 3])


def test_a_registered_format_is_read_by_every_path(tmp_path, tiny):
    path = tiny_file(tmp_path)
    whole = T.load(path)  # DuckDB, by the SQL built from TINY
    check(whole)
    np.testing.assert_array_equal(whole.hashes, [1, 2, 3, 1, 2, 1, 2, 4])
    np.testing.assert_array_equal(whole.pos, [0, 1, 2, 0, 1, 0, 1, 2])
    spec = jsonl.fields(TINY)
    assert spec == (("t_us", jsonl.NUMBER, True, -1), ("tokens", jsonl.INTEGER, True, 0),
                    ("blocks", jsonl.HASHES, True, -1))
    with open(path, "rb") as fh:  # the compiled path takes it whole (None: it gave up)
        assert jsonl.read([fh.read()], TINY, lambda h, nb: None, T.MAX_LINE_BYTES) is not None
    streamed = T.stream(path, tmp_path)  # the compiled JSONL path
    check(streamed)
    np.testing.assert_array_equal(np.fromfile(streamed.hashes_path, np.uint64), whole.hashes)
    sampled = T.load(path, sample_rate=0.5, full_positions=1)  # sampled as it is read
    check(sampled)
    expected = T.sample(whole, 0.5, full_positions=1)
    np.testing.assert_array_equal(sampled.hashes, expected.hashes)
    # requests 1 and 2 each continue a whole earlier prompt (blocks 1, 2 of 16 tokens each)
    assert T.reuse_stats(whole)["requests_continuation"] == pytest.approx(2 / 3)
    np.testing.assert_array_equal(T.continuations(whole), [-1, 0, 1])


@pytest.mark.parametrize("record,line,field,message", [
    ({"t_us": 3e6, "tokens": 40}, 4, "blocks", "missing field"),
    ({"t_us": 3e6, "tokens": 40, "blocks": [5, 6], "output_tokens": 1}, 4, "output_tokens",
     "unknown field; expected only t_us, tokens, blocks"),
    ({"t_us": 3e6, "tokens": 40, "blocks": [5, 6], "session_id": "a"}, 4, "session_id",
     SESSION_ID),
    ({"t_us": 3e6, "tokens": 40, "blocks": [5]}, 4, "blocks",
     "expected 3 (or 2) block hashes for 40 tokens in blocks of 16, got 1"),
    ({"t_us": 2e6, "tokens": 40, "blocks": [5, 6]}, 4, "t_us", "timestamp goes backwards"),
])
def test_a_registered_format_is_checked_by_its_declaration(tmp_path, tiny, record, line, field,
                                                            message):
    path = tiny_file(tmp_path)
    with open(path, "a") as fh:
        fh.write(json.dumps(record) + "\n")
    for read in (T.load, lambda p: T.stream(p, tmp_path)):
        with pytest.raises(T.TraceError) as err:
            read(path)
        assert (err.value.row, err.value.field) == (line, field)
        assert err.value.message.startswith(message)
