"""Trace options and trace shapes that had been refused under a flag the command never took
(issue 20, F20): each refusal names what the user gave."""
import json

from kvmath.cli.main import main


def test_batch_context_below_two_tokens_names_its_own_flag(capsys):
    assert main(["trace", "synthetic", "--model", "llama-3.1-8b", "--batch-context", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--batch-context must be at least 2" in err[0]
    assert "--tokens" not in err[0]


def test_one_token_blocks_are_a_valid_trace(capsys, tmp_path):
    # a block of one token: its bytes are one token's, taken from compare at two tokens
    f = tmp_path / "bt1.jsonl"
    f.write_text("".join(json.dumps({
        "timestamp_s": float(i), "prompt_tokens": 64, "block_tokens": 1, "output_tokens": 4,
        "block_hashes": list(range(1000 * (i % 3), 1000 * (i % 3) + 64))}) + "\n"
        for i in range(30)))
    assert main(["trace", str(f), "--model", "llama-3.1-8b", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out  # an answer, not a refusal


def test_equal_pauses_are_answered_and_the_fit_refused_in_words(capsys, tmp_path):
    # every pause the same (issue 20, F7): no lognormal to fit, said in words, and an answer
    f = tmp_path / "equal.jsonl"
    f.write_text("".join(json.dumps({
        "timestamp_s": float(i), "prompt_tokens": 64, "block_tokens": 16, "output_tokens": 4,
        "block_hashes": [i % 2 * 10 + k for k in range(4)]}) + "\n" for i in range(10)))
    assert main(["trace", str(f), "--model", "llama-3.1-8b", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["pause_fit"] is None and "no spread" in out["pause_fit_refused"]


def test_prompts_beyond_the_served_window_are_counted_and_said(capsys, tmp_path):
    # a trace's prompts longer than the model's window (an engine refuses them) had been
    # replayed without a word; --rope-scaling's longer window leaves fewer of them. A small
    # trace with prompts below, between and beyond the two windows (the conversation trace
    # served by every router took two minutes)
    path = tmp_path / "long.jsonl"
    rows, next_id = [], 0
    for i, tokens in enumerate((4000, 30000, 50000, 90000, 140000, 8000)):
        n = -(-tokens // 512)
        rows.append(json.dumps({"timestamp": 1000 * i, "input_length": tokens,
                                "output_length": 100,
                                "hash_ids": list(range(next_id, next_id + n))}))
        next_id += n
    path.write_text("\n".join(rows) + "\n")
    trace = str(path)
    for cmd in (["trace", trace], ["route", trace, "--nodes", "2"],
                ["fleet", trace, "--nodes", "2"]):
        assert main(cmd + ["--model", "qwen3-8b", "--json"]) == 0
        plain = json.loads(capsys.readouterr().out)
        assert plain["context_window_tokens"] == 40960 and plain["prompts_beyond_window"] > 0
        assert main(cmd + ["--model", "qwen3-8b", "--rope-scaling", "yarn", "--json"]) == 0
        scaled = json.loads(capsys.readouterr().out)
        assert scaled["context_window_tokens"] == 131072
        assert scaled["prompts_beyond_window"] < plain["prompts_beyond_window"]
    assert main(["trace", "conversation", "--model", "qwen3-8b"]) == 0
    assert "longer than qwen3-8b's window of 40,960 tokens" in capsys.readouterr().out
