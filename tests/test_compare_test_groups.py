"""posnet-compare --test-groups FILE (posnet_fairseq/compare/test_groups.py): kept % over a reference bucket
balanced to each bucket's mix of groups, the weighted BLEU it rests on, the groups of joined examples, the
refusal of a file of the wrong length, the line naming a group that cannot be balanced, and a micro run."""
import csv
import json

import numpy as np
import pytest
import sacrebleu

from posnet_fairseq.compare import test_groups, verdict
from posnet_fairseq.evaluation import crossed, generate_output
from tests.test_compare import CHEAP, run_compare

BLEU = sacrebleu.BLEU()
# Two groups that translate unequally well: every hypothesis of "good" matches at every order.
GOOD = [("the cat sat on the mat today", "the cat sat on the mat today ."),
        ("a dog ran in the park at noon", "a dog ran in the park at noon !")]
BAD = [("the cat is on a rug now", "the cat sat on the mat today ."),
       ("one dog walked in a park at night", "a dog ran in the park at noon !")]


def _stats(pairs):
    return verdict.sentence_stats(BLEU, [h for h, _ in pairs], [r for _, r in pairs])


def test_weights_give_each_group_its_share_beyond():
    # within: 2 a, 2 b (r = 4); beyond: 1 a, 3 b: w_a = (1/4) / (2/4), w_b = (3/4) / (2/4) (eq. 1)
    w, kept, left_out = test_groups.weights(["a", "b", "a", "b"], ["b", "a", "c", "b", "b"])
    assert w == pytest.approx([0.5, 1.5, 0.5, 1.5]) and sum(w) == pytest.approx(4)
    assert kept == [0, 1, 3, 4] and left_out == {"c": 1}
    assert test_groups.weights(["a"], ["c", "c"]) == (None, [], {"c": 2})


def test_weighted_bleu_is_sacrebleu_of_the_set_with_sentences_repeated():
    stats = _stats(GOOD + BAD)
    weights = [1, 3, 2, 1]
    score = crossed.bleu_influence(stats, weights)[0]
    repeated = [pair for pair, n in zip(GOOD + BAD, weights) for _ in range(n)]
    assert score == pytest.approx(BLEU.corpus_score([h for h, _ in repeated], [[r for _, r in repeated]]).score,
                                  abs=1e-9)
    assert score != pytest.approx(crossed.bleu(stats.sum(axis=0)), abs=0.5)  # the weights matter here


def test_balanced_kept_differs_from_the_unbalanced_by_the_mix():
    """A model that translates each group as well beyond as within keeps 100% of its BLEU once balanced;
    unbalanced, its kept % is BLEU on a bad-heavy mix over BLEU on a good-heavy one."""
    within_pairs = GOOD * 3 + BAD  # 6 good, 2 bad
    beyond_pairs = GOOD + BAD * 3  # 2 good, 6 bad
    groups = ["good"] * 6 + ["bad"] * 2 + ["good"] * 2 + ["bad"] * 6
    within, beyond = list(range(8)), {"33-48": list(range(8, 16))}
    stats_in, stats_out = _stats(within_pairs)[None], _stats(beyond_pairs)[None]
    unbalanced = verdict.kept_share(stats_in, stats_out)[0][0]
    ids, weights = test_groups.balance(groups, within, beyond)
    assert ids == beyond and weights["33-48"] == pytest.approx([1 / 3] * 6 + [3] * 2)
    balanced, influence = verdict.kept_share(stats_in, stats_out, weights["33-48"])
    assert balanced[0] == pytest.approx(100, abs=1e-9)
    expected = 100 * (BLEU.corpus_score([h for h, _ in beyond_pairs], [[r for _, r in beyond_pairs]]).score
                      / BLEU.corpus_score([h for h, _ in within_pairs], [[r for _, r in within_pairs]]).score)
    assert unbalanced == pytest.approx(expected, abs=1e-9) and unbalanced < 70
    # the influence terms take the weights: a reweighted reference sentence moves the ratio by its weight
    plain = verdict.kept_share(stats_in, stats_out)[1]
    assert influence[0, :8] != pytest.approx(plain[0, :8]) and influence.sum() == pytest.approx(0, abs=1e-9)


def test_a_groups_file_of_another_length_is_refused(tmp_path):
    path = tmp_path / "book.txt"
    path.write_text("Ruth\nRuth\nJohn\n")
    with pytest.raises(ValueError) as err:
        test_groups.read(str(path), 5)
    assert str(err.value) == (f"--test-groups {path}: 3 lines, but the test set has 5 natural test sentences "
                              "(one label per sentence, in the test set's order)")
    assert test_groups.read(str(path), 3) == ["Ruth", "Ruth", "John"]
    with pytest.raises(ValueError, match=r"order\); 1 test pairs were left out as longer than the models take: "
                                         "label the others$"):
        test_groups.read(str(path), 2, left_out=1)


def test_joined_examples_take_their_first_pairs_group_or_mixed():
    refs = [f"r{i}" for i in range(7)]
    groups = ["Ruth", "Ruth", "Ruth", "John", "John", "John", "John"]
    joined = ["r0 r1", "r2 r3", "r4 r5"]
    assert test_groups.of_joined(groups, refs, joined, 2) == ["Ruth", test_groups.MIXED, "John"]
    # a run left out (longer than the models take): the others still find their own
    assert test_groups.of_joined(groups, refs, ["r0 r1", "r4 r5"], 2) == ["Ruth", "John"]
    with pytest.raises(ValueError, match="--test-groups: joined test example 2 is no run of 2"):
        test_groups.of_joined(groups, refs, ["r0 r1", "r1 r2"], 2)


def test_a_group_absent_within_is_left_out_and_named():
    pairs = GOOD * 2 + BAD[:1] + GOOD[:1] + BAD  # John x 4, Rom, Ruth, Rom x 2
    groups = ["John"] * 4 + ["Rom"] + ["Ruth"] + ["Rom"] * 2
    hyps, refs = {"m": [h for h, _ in pairs]}, [r for _, r in pairs]
    lengths = [10] * 5 + [40] * 3
    rows = [{"lo": 33, "hi": 48, "beyond_training": True, "too_small": False,
             "scores": {"m": {"score": 1.0}}}]
    summary = test_groups.summary(BLEU, "/data/test.book", list(range(5)), (hyps, refs, lengths, groups), None,
                                  rows)
    entry = summary["buckets"]["33_48"]
    assert entry["left_out"] == {"Ruth": 1} and entry["mix"] == {"Rom": 2}
    # only Rom is left beyond: the reference is its one Rom sentence, of weight (2 / 2) / (1 / 5) = 5 (eq. 1)
    assert entry["kept"]["m"] == pytest.approx(100 * crossed.bleu(_stats(BAD).sum(axis=0))
                                               / crossed.bleu(5 * _stats(BAD[:1])[0]), abs=1e-9)
    text = test_groups.note(summary, "17-32")
    assert "33-48: left out 1 sentence of `Ruth`, a group with no sentence in 17-32." in text.splitlines()
    assert "Balanced by the groups of `test.book` (--test-groups)" in text
    assert "Group mix: 17-32 (reference, n=5): John 80%, Rom 20%; 33-48 (n=2): Rom 100%." in text.splitlines()
    assert test_groups.note(None, "17-32") == ""


def _csv(path):
    with open(path, newline="") as f:
        return {row["arch"]: row for row in csv.DictReader(f)}


def test_micro_run_balances_every_kept_figure(tmp_path):
    """Synthetic corpus (train <= 10 words, test up to 25), K = 3; groups in blocks of three test sentences,
    with a third group every seventh sentence: the buckets mix them unevenly, and the joined examples that hold
    a sentence of the third group are "mixed"."""
    out, groups_file = tmp_path / "run", tmp_path / "groups.txt"
    groups = [("A", "B")[(i // 3) % 2] if i % 7 else "C" for i in range(40)]
    groups_file.write_text("".join(g + "\n" for g in groups))
    argv = ["--archs", "posnet_transformer_tiny", "--out", str(out), "--budget", "2u", "--train-pairs", "150",
            "--valid", "10", "--test", "40", "--train-max-len", "10", "--vocab-size", "400", "--interval", "1",
            "--decode-lengths", "8", "--min-bucket-sentences", "3", "--concat-test", "3",
            "--test-groups", str(groups_file), *CHEAP]
    run_compare(argv)
    quality = json.loads((out / "quality.json").read_text())
    summary = quality["test_groups"]
    assert summary["file"] == "groups.txt"
    lengths = json.loads((out / "steps" / "data.json").read_text())["result"]["test_lengths"]
    natural = [b for b in quality["buckets"] if not b.get("concatenated")]
    reference = [b for b in natural if not b["beyond_training"] and not b["too_small"]][-1]
    within = [i for i, n in enumerate(lengths) if reference["lo"] <= n <= reference["hi"]]
    refs = (out / "raw" / "test.tgt").read_text().splitlines()
    row = _csv(out / "results.csv")["posnet_transformer_tiny"]
    beyond = [b for b in natural if b["beyond_training"] and not b["too_small"]]
    assert beyond and all(f"concat3_{b['lo']}_{b['hi']}" in summary["buckets"]
                          for b in quality["buckets"] if b.get("concatenated") and not b["too_small"])
    hyps = generate_output.read(out / "gen" / "posnet_transformer_tiny.out").ordered("hypotheses", len(refs))
    metric = sacrebleu.BLEU(force=True)  # the synthetic corpus's
    for b in beyond:  # eq. 1 by hand, on sacreBLEU's own statistics
        ids = [i for i, n in enumerate(lengths) if b["lo"] <= n <= b["hi"] and groups[i] in
               {groups[j] for j in within}]
        share = {g: sum(groups[i] == g for i in ids) / len(ids) for g in set(groups)}
        w = np.array([share[groups[i]] * len(within) / sum(groups[j] == groups[i] for j in within) for i in within])
        stats = np.array(metric._extract_corpus_statistics([hyps[i] for i in within], [[refs[i] for i in within]]))
        out_stats = metric._extract_corpus_statistics([hyps[i] for i in ids], [[refs[i] for i in ids]])
        expected = 100 * crossed.bleu(np.sum(out_stats, axis=0)) / crossed.bleu((stats * w[:, None]).sum(axis=0))
        assert float(row[f"bleu_kept_{b['lo']}_{b['hi']}"]) == pytest.approx(expected, rel=1e-5)
    kept_tests = quality["kept"]["posnet_transformer_tiny"]
    assert kept_tests and all(entry["balanced"] for entry in kept_tests.values())
    # the joined buckets are tested too, over the same balanced reference: the table's kept % is the test's
    # (where the table has one: not where the model's translations were cut by its limit)
    joined_kept = {name: b for name, b in summary["buckets"].items() if name.startswith("concat3_") and b["kept"]}
    assert joined_kept
    for name, b in joined_kept.items():
        entry = kept_tests[b["label"]]
        assert entry["sentences"] == sum(b["mix"].values()) and entry["balanced"]
        assert float(row[f"bleu_kept_{name}"]) == pytest.approx(entry["kept"]["effect"], rel=1e-5)
    text = (out / "results.md").read_text()
    assert "Balanced by the groups of `groups.txt` (--test-groups)" in text
    assert f"Group mix: {reference['lo']}-{reference['hi']} (reference, n={len(within)}): " in text
    joined = [b for name, b in summary["buckets"].items() if name.startswith("concat3_")]
    left_out = [b for b in joined if b["left_out"]]
    assert left_out and all(set(b["left_out"]) == {test_groups.MIXED} for b in left_out)
    for b in left_out:
        n = b["left_out"][test_groups.MIXED]
        assert (f"{b['label']}: left out {n} sentence{'s' * (n != 1)} of `mixed`, a group with no sentence in "
                f"{reference['lo']}-{reference['hi']}.") in text
    # the Verdict section's kept lines say so too (this run has no model to compare, so no verdict lines)
    lines = verdict.lines({"other": {"in range": None, "beyond": None}}, quality["kept"], "posnet_transformer_tiny",
                          [1], 10, "words", f"{reference['lo']}-{reference['hi']}")
    assert any("(balanced to each bucket's groups: see the kept table)" in line for line in lines)


@pytest.mark.parametrize("lines, message", [
    (3, "--test-groups {path}: 3 lines, but the test set has 12 natural test sentences (one label per sentence, "
        "in the test set's order)"),
    (None, "--test-groups {path}: No such file or directory"),
])
def test_posnet_compare_refuses_a_groups_file_that_does_not_fit(lines, message, tmp_path, capsys):
    from posnet_fairseq.cli import compare

    path = tmp_path / "groups.txt"
    if lines is not None:
        path.write_text("g\n" * lines)
    with pytest.raises(SystemExit):
        compare.main(["--archs", "posnet_transformer_tiny", "--out", str(tmp_path / "o"), "--train-pairs", "60",
                      "--valid", "5", "--test", "12", "--train-max-len", "10", "--vocab-size", "200",
                      "--test-groups", str(path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "posnet-compare: error: " + message.format(path=path)
