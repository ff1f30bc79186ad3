"""posnet-compare --concat-test K (posnet_fairseq/compare/concatenated.py): the joining of K consecutive test
pairs, their buckets, and a micro run (synthetic corpus and --raw) whose results.md, csv and plot show the
joined buckets, marked."""
import csv
import json

import pytest

from posnet_fairseq.cli import compare
from posnet_fairseq.compare import concatenated, plots
from tests.test_compare import CHEAP, run_compare


def test_runs_are_consecutive_non_overlapping_and_the_tail_is_left():
    sources = [f"s{i}" for i in range(11)]
    targets = [f"t{i} ." for i in range(11)]
    src, tgt, tail = concatenated.join_runs(sources, targets, 4)
    assert src == ["s0 s1 s2 s3", "s4 s5 s6 s7"]
    assert tgt == ["t0 . t1 . t2 . t3 .", "t4 . t5 . t6 . t7 ."]  # the same pairs, in the same order
    assert tail == 3  # s8..s10: fewer than 4, not joined
    assert concatenated.join_runs(sources[:8], targets[:8], 4)[2] == 0
    assert concatenated.join_runs(sources, targets, 2) == (
        ["s0 s1", "s2 s3", "s4 s5", "s6 s7", "s8 s9"], ["t0 . t1 .", "t2 . t3 .", "t4 . t5 .", "t6 . t7 .",
                                                         "t8 . t9 ."], 1)


def test_appended_after_the_natural_pairs_over_long_ones_left_out(tmp_path):
    raw, text = tmp_path / "raw", tmp_path / "text"
    raw.mkdir(), text.mkdir()
    (raw / "test.src").write_text("a b\nc\nd e f\ng\nh\n")
    (raw / "test.tgt").write_text("A B\nC\nD E F\nG\nH\n")
    for lang in ("src", "tgt"):
        (text / f"test.{lang}").write_text("x\n" * 5)
    with pytest.raises(ValueError, match="--concat-test 6: the test split has only 5 pairs"):
        concatenated.joined_test(str(raw), 6)
    joined = concatenated.joined_test(str(raw), 2)
    assert joined == (["a b c", "d e f g"], ["A B C", "D E F G"], 1)
    # a piece per word: "d e f g" and its EOS are 5 positions, over the models' 4
    summary = concatenated.append_to_test(joined, 2, str(raw), str(text),
                                          lambda line: " ".join("_" + w for w in line.split()), [4, 4])
    assert summary == {"k": 2, "runs": 2, "tail": 1, "examples": 1, "too_long": 1}
    assert (raw / "test.src").read_text().splitlines() == ["a b", "c", "d e f", "g", "h", "a b c"]
    assert (raw / "test.tgt").read_text().splitlines()[-1] == "A B C"
    assert (text / "test.src").read_text().splitlines() == ["x"] * 5 + ["_a _b _c"]
    lengths, summary = concatenated.separate([1, 2, 3, 1, 1, 3], summary)
    assert lengths == [1, 2, 3, 1, 1] and summary["lengths"] == [3]
    assert concatenated.separate([1, 2], None) == ([1, 2], None)


def test_buckets_start_beyond_the_training_lengths():
    assert concatenated.buckets([5, 21, 40, 41, 75], 20) == [(21, 40), (41, 60), (61, 75)]
    assert concatenated.buckets([5, 300], 20) == [(21, 40), (41, 60), (61, 80), (81, 300)]  # at most 4
    assert concatenated.buckets([5, 20], 20) == []  # nothing beyond: no bucket
    # a name of its own: a joined bucket may span a natural one's lengths
    assert concatenated.bucket_name(21, 40) == "21_40" and concatenated.bucket_name(21, 40, 4) == "concat4_21_40"
    assert concatenated.bucket_label(21, 40, 4) == "\u22954 21-40"


def test_split_outputs_numbers_the_joined_part_from_zero():
    outputs = {"a": (["h0", "h1", "h2", "j0", "j1"], [1, 4])}
    (natural, refs, src, tgt), joined = concatenated.split_outputs(outputs, list("rrrRR"), [1, 2, 3, 9, 8],
                                                                   [1, 2, 3, 7, 6], 3)
    assert natural == {"a": (["h0", "h1", "h2"], [1])} and refs == list("rrr") and src == [1, 2, 3]
    assert joined == ({"a": (["j0", "j1"], [1])}, list("RR"), [9, 8], [7, 6])


@pytest.mark.parametrize("argv, message", [
    (["--data", "bin", "--post-process", "none", "--concat-test", "4"], "--concat-test joins raw test text"),
    (["--concat-test", "1"], "--concat-test 1: must be at least 2"),
])
def test_bad_concat_test_is_named(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit):
        compare.main(["--archs", "posnet_transformer_tiny", "--out", str(tmp_path / "o"), *argv])
    assert message in capsys.readouterr().err


def _csv(path):
    with open(path, newline="") as f:
        return {row["arch"]: row for row in csv.DictReader(f)}


def test_micro_run_scores_the_joined_examples_in_marked_buckets(tmp_path):
    """Synthetic corpus (train <= 10 words, test up to 25), K = 3: the joined examples reach 75 words."""
    out = tmp_path / "run"
    run_compare(["--archs", "posnet_transformer_tiny", "--out", str(out), "--budget", "2u", "--train-pairs", "150",
                 "--valid", "10", "--test", "40", "--train-max-len", "10", "--vocab-size", "400", "--interval", "1",
                 "--decode-lengths", "8", "--min-bucket-sentences", "3", "--concat-test", "3", *CHEAP])
    sources = (out / "raw" / "test.src").read_text().splitlines()
    assert len(sources) == 40 + 13  # 13 runs of 3, the last test pair not joined
    assert sources[40] == " ".join(sources[:3]) and sources[-1] == " ".join(sources[36:39])
    quality = json.loads((out / "quality.json").read_text())
    natural = [b for b in quality["buckets"] if not b.get("concatenated")]
    joined = [b for b in quality["buckets"] if b.get("concatenated")]
    assert sum(b["sentences"] for b in natural) == 40  # the natural buckets hold the natural sentences only
    assert joined and all(b["concatenated"] == 3 and b["beyond_training"] and b["lo"] > 10 for b in joined)
    within = sum(len(s.split()) <= 10 for s in sources[40:])
    assert sum(b["sentences"] for b in joined) == 13 - within
    assert quality["concatenated"] == {"k": 3, "runs": 13, "tail": 1, "examples": 13, "too_long": 0,
                                       "within_training": within}
    text = (out / "results.md").read_text()
    for b in joined:
        assert f"BLEU \u22953 {b['lo']}-{b['hi']} * (n={b['sentences']})" in text
    assert "- \u22953: concatenated, not natural sentences (`--concat-test 3`" in text
    row = _csv(out / "results.csv")["posnet_transformer_tiny"]
    assert all(f"bleu_len_concat3_{b['lo']}_{b['hi']}" in row for b in joined)
    # the whole test set's BLEU is the natural sentences': 40 hypotheses against 40 references
    import sacrebleu

    from posnet_fairseq.evaluation import generate_output

    refs = (out / "raw" / "test.tgt").read_text().splitlines()
    hyps = generate_output.read(out / "gen" / "posnet_transformer_tiny.out").ordered("hypotheses", len(refs))
    assert float(row["bleu"]) == pytest.approx(sacrebleu.corpus_bleu(hyps[:40], [refs[:40]], force=True).score,
                                               abs=1e-4)
    first = joined[0]
    ids = [40 + i for i, s in enumerate(sources[40:]) if first["lo"] <= len(s.split()) <= first["hi"]]
    expected = sacrebleu.corpus_bleu([hyps[i] for i in ids], [[refs[i] for i in ids]], force=True).score
    assert float(row[f"bleu_len_concat3_{first['lo']}_{first['hi']}"]) == pytest.approx(expected, abs=1e-4)
    # the plot: the joined columns marked under their ticks, a dotted line before them, the note in the label
    results = json.loads((out / "results.json").read_text())
    fig = plots.bleu_by_length(results["table"], results["buckets"], results["train_limit"], "words",
                               tmp_path / "b.png")
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert [t.startswith("\u22953 ") for t in ticks] == [bool(b.get("concatenated")) for b in results["buckets"]]
    assert any(line.get_linestyle() == ":" and line.get_xdata()[0] == len(natural) - 0.5 for line in ax.lines)
    assert "\u22953: concatenated, not natural sentences" in ax.get_xlabel()


def test_raw_corpus_joins_its_own_test_file_and_counts_over_long_examples(tmp_path):
    """--raw with --raw-test: runs of the test file as given; a joined example over the models' positions is
    left out and counted."""
    from posnet_fairseq.data.synth import generate_pairs

    pairs = generate_pairs(200, seed=9, max_len=12)
    (tmp_path / "c.en").write_text("".join(s + "\n" for s, _ in pairs))
    (tmp_path / "c.xx").write_text("".join(t + "\n" for _, t in pairs))
    test = generate_pairs(20, seed=10, max_len=12)
    long = " ".join(["dog"] * 60)
    test[9] = (long, long)  # fits 64 positions; the run of pairs 9-10 (K = 2) does not
    (tmp_path / "t.en").write_text("".join(s + "\n" for s, _ in test))
    (tmp_path / "t.xx").write_text("".join(t + "\n" for _, t in test))
    out = tmp_path / "run"
    run_compare(["--archs", "posnet_transformer_tiny", "--raw", str(tmp_path / "c.en"), str(tmp_path / "c.xx"),
                 "--raw-test", str(tmp_path / "t.en"), str(tmp_path / "t.xx"), "--valid", "10",
                 "--vocab-size", "200", "--out", str(out), "--budget", "1u", "--interval", "1",
                 "--train-max-len", "12", "--decode-lengths", "8", "--min-bucket-sentences", "2",
                 "--concat-test", "2", *CHEAP[:-2], "--model-flags",
                 CHEAP[-1] + " --max-source-positions 64 --max-target-positions 64"])
    quality = json.loads((out / "quality.json").read_text())
    assert {k: quality["concatenated"][k] for k in ("k", "runs", "tail", "too_long")} == \
        {"k": 2, "runs": 10, "tail": 0, "too_long": 1}
    raw = (out / "raw" / "test.src").read_text().splitlines()
    assert raw[-9:] == [f"{test[i][0]} {test[i + 1][0]}" for i in range(0, 20, 2) if i != 8]
    text = (out / "results.md").read_text()
    assert "1 left out as longer than the models take" in text and "BLEU \u22952 " in text
