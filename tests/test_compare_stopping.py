"""Where decoding stopped (posnet_fairseq/compare/stopping.py): the thresholds, the buckets, the columns and
table on constructed translations, and a micro posnet-compare run read back by its entry point, whose
untrained model runs into fairseq-generate's length limit exactly where :func:`stopping.limit` puts it."""
import json

import pytest
from sacrebleu.metrics import BLEU

from posnet_fairseq.compare import stopping
from posnet_fairseq.evaluation import generate_output
from tests.test_compare import CHEAP, run_compare


def test_the_three_kinds_split_at_0_8_and_1_2():
    assert [stopping.kind(r) for r in (0.0, 0.79, 0.8, 1.0, 1.2, 1.21, 3.0)] == [
        "early", "early", "right", "right", "right", "late", "late"]


def test_the_limit_is_fairseqs_for_the_sentence_alone_in_its_batch():
    # fairseq: min(int(a * (source + EOS) + b), max_target_positions - 1)
    assert stopping.limit(10, 2.0, 10, 1024) == 32
    assert stopping.limit(10, 1.5, 0, 1024) == 16
    assert stopping.limit(10, 2.0, 10, 30) == 29


def test_buckets_classify_each_sentence_and_leave_skipped_ones_out():
    bleu = BLEU(force=True)
    refs = ["a b c d e", "a b c d e", "a b c d e", "a b c d e f g h i j", "a b c d e f g h i j", "a b"]
    hyps = ["a b c", "a b c d e", "a b c d e f g", "a b c d e f g h i j", "", "a b"]
    tokens = [3, 5, 7, 40, 0, None]
    limits = [32, 32, 7, 40, 40, 30]
    stops = stopping.stops(hyps, refs, tokens, limits, skipped=[5], bleu=bleu)
    assert [s.ratio for s in stops[:5]] == pytest.approx([0.6, 1.0, 1.4, 1.0, 0.0])
    assert [s.at_limit for s in stops] == [False, False, True, True, False, None]
    assert stops[5].ratio is None  # skipped: not classified
    # sentences 0-2 and 5 of length 5, 3-4 of length 10, plus a joined example (k=2) of length 10
    sentences = [(5, None)] * 3 + [(10, None)] * 2 + [(5, None), (10, 2)]
    stops.append(stopping.Stop(1.1, None))
    rows = stopping.bucket_rows([(1, 6, None), (7, 12, None), (7, 12, 2)], sentences, stops)
    assert rows[0] == {"lo": 1, "hi": 6, "concatenated": None, "sentences": 3, "skipped": 1,
                       "early": pytest.approx(1 / 3), "right": pytest.approx(1 / 3), "late": pytest.approx(1 / 3),
                       "at_limit": pytest.approx(1 / 3)}
    assert (rows[1]["early"], rows[1]["right"], rows[1]["late"], rows[1]["at_limit"]) == (0.5, 0.5, 0.0, 0.5)
    # the joined example is in its own bucket only; its length in tokens is unknown
    assert (rows[2]["sentences"], rows[2]["right"], rows[2]["at_limit"]) == (1, 1.0, None)
    columns = stopping.columns(rows)
    assert columns["stop_early_1_6"] == pytest.approx(1 / 3) and columns["stop_limit_7_12"] == 0.5
    assert columns["stop_right_concat2_7_12"] == 1.0 and columns["stop_limit_concat2_7_12"] is None
    lines = stopping.markdown({"m": rows, "n": [dict(r, sentences=0) for r in rows]})
    assert lines[0] == "## Where decoding stopped"
    assert lines[4] == "| model | 1-6 | 7-12 | \u22952 7-12 |"
    assert lines[6] == "| `m` | 33/33/33 (33) | 50/50/0 (50) | 0/100/0 (-) |"
    assert lines[7] == "| `n` | - | - | - |"


def test_the_reader_counts_model_tokens_from_the_p_lines(tmp_path):
    path = tmp_path / "gen.out"
    path.write_text("S-1\ta b\nH-1\t-0.5\tx y z\nD-1\t-0.5\tx y z\nP-1\t-0.1 -0.2 -0.3 -0.4\nH-0\t-1\t\n"
                    "P-0\t-0.7\n")
    output = generate_output.read(path)
    assert output.token_counts(3) == [0, 3, None]  # EOS not counted; sentence 2 has no line


def test_a_finished_run_read_back_hits_the_limit_where_fairseq_does(tmp_path, capsys):
    out = tmp_path / "run"
    # An untrained model (one update) rarely chooses EOS; one sentence per batch makes fairseq's limit the
    # sentence's own: a x (source + EOS) + b.
    run_compare(["--archs", "posnet_transformer_tiny", "--out", str(out), "--budget", "1u", "--train-pairs", "60",
                 "--valid", "6", "--test", "12", "--train-max-len", "10", "--vocab-size", "200", "--interval", "1",
                 "--decode-lengths", "8", "--jobs", "1", "--min-bucket-sentences", "2", "--batch-size", "1",
                 "--max-len-a", "1", "--max-len-b", "1", *CHEAP])
    from posnet_fairseq.compare import data
    from posnet_fairseq.compare.steps import Steps

    info = data.finished(Steps(str(out)))
    sources = data.split_lengths(info.data_bin, "test", *info.langs)
    output = generate_output.read(out / "gen" / "posnet_transformer_tiny.out")
    tokens = output.token_counts(len(sources))
    limits = [stopping.limit(n, 1.0, 1, 1024) for n in sources]
    assert all(t <= lim for t, lim in zip(tokens, limits))  # never beyond the limit
    at_limit = sum(t == lim for t, lim in zip(tokens, limits))
    assert at_limit >= len(sources) - 2  # stopped by force, at exactly that many tokens
    assert stopping.main([str(out), "--json"]) == 0
    tables = json.loads(capsys.readouterr().out)
    rows = tables["posnet_transformer_tiny"]
    with open(out / "quality.json") as f:
        assert [(r["lo"], r["hi"]) for r in rows] == [(b["lo"], b["hi"]) for b in json.load(f)["buckets"]]
    assert sum(r["sentences"] + r["skipped"] for r in rows) == len(sources)
    assert sum(r["at_limit"] * r["sentences"] for r in rows) == pytest.approx(at_limit)
    assert stopping.main([str(out)]) == 0
    table = capsys.readouterr().out
    assert table.startswith("## Where decoding stopped")
    # the run's own report holds the same table, and its csv the shares
    assert table.strip() in (out / "results.md").read_text()
    result = json.loads((out / "results.json").read_text())["table"][0]
    assert [result[f"stop_limit_{r['lo']}_{r['hi']}"] for r in rows] == [r["at_limit"] for r in rows]
    with pytest.raises(SystemExit):
        stopping.main([str(tmp_path / "nowhere")])
    assert "no finished posnet-compare run there" in capsys.readouterr().err
