"""Unit tests of posnet_fairseq.data, .evaluation and .recipe_tools: the Python pieces of the recipes (no training)."""
import json
import os
import sys

import pytest

from posnet_fairseq.data import clean_corpus, text
from posnet_fairseq.evaluation import bootstrap, evaluate, hooks, meteor, tables
from posnet_fairseq.cli import average_checkpoints
from posnet_fairseq.table_runs import plancheck


def _write(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def _read(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


# --- clean corpus -------------------------------------------------------------------------------

@pytest.mark.parametrize("src,tgt,keep", [
    ("a b c", "x y z", True),
    ("a b c", "x", False),             # ratio 3 > 1.5
    ("a b", "x y z", True),            # ratio exactly 1.5
    ("", "x", False),                  # empty side
    ("a " * 6, "x " * 6, False),       # 6 > max 5
    ("a", "x", False),                 # 1 < min 2
])
def test_keep_pair(src, tgt, keep):
    assert clean_corpus.keep_pair(src.strip(), tgt.strip(), 2, 5, ratio=1.5) is keep


def test_clean_corpus_files_normalise_whitespace(tmp_path):
    _write(tmp_path / "c.de", ["  ein   haus ", "zu lang zu lang zu lang", "kurz"])
    _write(tmp_path / "c.en", ["a  house", "too long", "this is far too long"])
    kept, total = clean_corpus.clean_corpus(str(tmp_path / "c"), "de", "en", str(tmp_path / "o"), 1, 10, 1.5)
    assert (kept, total) == (1, 3)
    assert _read(tmp_path / "o.de") == ["ein haus"] and _read(tmp_path / "o.en") == ["a house"]


def test_clean_corpus_rejects_unequal_sides(tmp_path):
    _write(tmp_path / "c.de", ["a", "b"])
    _write(tmp_path / "c.en", ["a"])
    with pytest.raises(SystemExit):
        clean_corpus.main([str(tmp_path / "c"), "de", "en", str(tmp_path / "o"), "1", "10"])


# --- text ---------------------------------------------------------------------------------------

def test_iwslt_train_filter():
    lines = ["<url>http://x</url>\n", "<talkid>1</talkid>\n", "<keywords>a</keywords>\n",
             "<title>Der Titel</title>\n", "<description>Eine Rede</description>\n", "Hallo Welt.\n"]
    assert list(text.iwslt_train_lines(lines)) == ["Der Titel", "Eine Rede", "Hallo Welt."]


def test_seg_lines_xml_and_sgm():
    lines = ['<doc docid="1">\n', '<seg id="1"> It\u2019s here. </seg>\n', '<seg id=2>Two</seg>\n', "</doc>\n"]
    assert list(text.seg_lines(lines)) == ["It's here.", "Two"]


def test_holdout_every_nth(tmp_path):
    _write(tmp_path / "c.a", [str(i) for i in range(1, 8)])
    _write(tmp_path / "c.b", [str(i) for i in range(1, 8)])
    counts = text.holdout(str(tmp_path / "c"), "a", "b", str(tmp_path / "t"), str(tmp_path / "v"), 3)
    assert counts == (5, 2)
    assert _read(tmp_path / "v.a") == ["3", "6"] and _read(tmp_path / "t.b") == ["1", "2", "4", "5", "7"]


def test_long_pair_joins_the_corpus_pairs(tmp_path):
    _write(tmp_path / "v.src", ["a b c", "d e"])
    _write(tmp_path / "v.tgt", ["x y", "z"])
    assert text.append_long_pair(str(tmp_path / "v"), "src", "tgt", 6) == (13, 8)  # both sides over 6
    assert _read(tmp_path / "v.src")[2] == "a b c d e a b c d e a b c"
    assert _read(tmp_path / "v.tgt")[2] == "x y z x y z x y"
    _write(tmp_path / "e.src", [""])
    _write(tmp_path / "e.tgt", [""])
    with pytest.raises(ValueError, match="no pair over 3 tokens"):
        text.append_long_pair(str(tmp_path / "e"), "src", "tgt", 3)


def test_moses_tokenisation_matches_tokenizer_perl_conventions():
    line = "It's a well-known fact & \u201cquoted\u201d."
    assert text.tokenize_line(line, "en") == "It &apos;s a well-known fact &amp; \u201c quoted \u201d ."
    assert "well @-@ known" in text.tokenize_line(line, "en", aggressive=True)
    assert text.tokenize_line(line, "en", normalize=True, lowercase=True).startswith("it &apos;s")
    assert text.remove_non_printing("a\u200bb\x07c") == "a b c"


# --- bootstrap ----------------------------------------------------------------------------------

REFS = [f"the cat number {i} sat on the mat today" for i in range(40)]
GOOD = list(REFS)
BAD = [f"a dog number {i} stood near a rug" for i in range(40)]


def test_bootstrap_identical_systems_are_not_significant():
    res = bootstrap.paired_bootstrap(bootstrap.make_metric("bleu"), GOOD, GOOD, REFS, samples=200)
    assert res["p_value"] == 1.0 and res["mean_delta"] == 0.0


def test_bootstrap_clearly_better_system():
    metric = bootstrap.make_metric("bleu")
    res = bootstrap.paired_bootstrap(metric, GOOD, BAD, REFS, samples=200)
    assert res["p_value"] == 0.0 and res["system"] == 100.0 and res["baseline"] < 30
    reverse = bootstrap.paired_bootstrap(metric, BAD, GOOD, REFS, samples=200)
    assert reverse["p_value"] == 1.0


def test_bootstrap_mixed_system_is_seed_deterministic_and_matches_corpus_score():
    mixed = GOOD[:20] + BAD[20:]
    metric = bootstrap.make_metric("chrf")
    a = bootstrap.paired_bootstrap(metric, mixed, BAD, REFS, samples=100, seed=7)
    b = bootstrap.paired_bootstrap(metric, mixed, BAD, REFS, samples=100, seed=7)
    assert a == b
    assert a["system"] == pytest.approx(metric.corpus_score(mixed, [REFS]).score, abs=1e-3)
    # half the sentences perfect, the other half as the baseline's: better in every resample, never worse
    assert (a["p_value"], a["p_value_worse"], bootstrap.significance(a)) == (0.0, 1.0, "better")


def test_bootstrap_unequal_sizes():
    with pytest.raises(ValueError, match="equal sizes"):
        bootstrap.paired_bootstrap(bootstrap.make_metric("bleu"), GOOD[:3], GOOD, REFS)


# --- evaluate -----------------------------------------------------------------------------------

def test_compound_split_as_fairseq_perl():
    assert evaluate.compound_split("a well-known x-y-z") == "a well ##AT##-##AT## known x ##AT##-##AT## y-z"
    # on -a tokenised text the perl rule also splits the @-@ token, exactly as fairseq's script does
    assert evaluate.compound_split("well @-@ known") == "well @ ##AT##-##AT## @ known"


def _dataset(tmp_path, conf_extra=None, n=6):
    raw_src = [f"Quelle {i}." for i in range(n)]
    raw_ref = [f"The well-known cat {i} sat on the mat, didn't it?" for i in range(n)]
    from sacremoses import MosesTokenizer

    tok = MosesTokenizer(lang="en")
    tok_ref = [tok.tokenize(r, aggressive_dash_splits=True, return_str=True, escape=True) for r in raw_ref]
    os.makedirs(tmp_path / "data" / "raw")
    _write(tmp_path / "data" / "raw" / "test.de", raw_src)
    _write(tmp_path / "data" / "raw" / "test.en", raw_ref)
    _write(tmp_path / "data" / "raw" / "test.tok.en", tok_ref)
    conf = {"target_lang": "en", "detok": "moses", "sacrebleu_tokenize": "13a", "lowercase": False,
            "compound_split": True,
            "test_sets": {"test": {"name": "fixture", "raw_source": "raw/test.de", "raw_ref": "raw/test.en",
                                   "tok_ref": "raw/test.tok.en"}}}
    conf.update(conf_extra or {})
    with open(tmp_path / "data" / "stats.json", "w") as f:
        json.dump({"eval": conf}, f)
    return tok_ref


def _generate_output(path, hyps):
    lines = []
    for i, h in hyps:
        lines += [f"S-{i}\tquelle", f"T-{i}\tref", f"H-{i}\t-0.5\t{h}", f"D-{i}\t-0.5\t{h}", f"P-{i}\t-0.1"]
    _write(path, lines + ["Generate test with beam=4: BLEU4 = 1.00"])


def _args(tmp_path, out, **kw):
    argv = ["--generate-output", str(tmp_path / f"{out}.gen"), "--stats", str(tmp_path / "data" / "stats.json"),
            "--out-dir", str(tmp_path / out), "--row", out]
    for k, v in kw.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    return argv


def test_evaluate_perfect_output_scores_100_everywhere(tmp_path, capsys):
    tok_ref = _dataset(tmp_path)
    _generate_output(tmp_path / "sys.gen", list(enumerate(tok_ref))[::-1])  # order of ids must not matter
    assert evaluate.main(_args(tmp_path, "sys")) == 0
    result = json.load(open(tmp_path / "sys" / "result.json"))
    for key in ("sacrebleu", "bleu_tok", "bleu_compound_split", "chrf"):
        assert result[key]["score"] == 100.0, key
    assert result["sacrebleu"]["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp")
    assert result["missing"] == 0
    # detokenized output is the raw reference again (escaping undone, hyphens rejoined)
    assert _read(tmp_path / "sys" / "hyp.detok") == _read(tmp_path / "data" / "raw" / "test.en")
    assert "tok:13a" in capsys.readouterr().out


def test_evaluate_missing_sentences_and_significance_in_both_directions(tmp_path):
    tok_ref = _dataset(tmp_path, n=30)
    _generate_output(tmp_path / "base.gen", [(i, "the dog") for i in range(30)])
    _generate_output(tmp_path / "sys.gen", [(i, t) for i, t in enumerate(tok_ref) if i != 3])
    evaluate.main(_args(tmp_path, "base"))
    evaluate.main(_args(tmp_path, "sys", baseline=f"base={tmp_path / 'base'}", bootstrap_samples=100))
    result = json.load(open(tmp_path / "sys" / "result.json"))
    assert result["missing"] == 1 and _read(tmp_path / "sys" / "hyp.tok")[3] == ""
    assert result["sacrebleu"]["score"] < 100.0
    sig = result["significance"]["base"]
    assert sig["sacrebleu"]["direction"] == "better" and sig["bleu_tok"]["p_value"] == 0.0
    assert sig["bleu_tok"]["p_value_worse"] == 1.0 and sig["baseline"] == os.path.join("..", "base")
    # the other way round the difference is marked too, as a degradation (the PosNet paper's marks)
    os.rename(tmp_path / "base.gen", tmp_path / "base2.gen")
    evaluate.main(_args(tmp_path, "base2", baseline=f"sys={tmp_path / 'sys'}", bootstrap_samples=100))
    sig = json.load(open(tmp_path / "base2" / "result.json"))["significance"]["sys"]
    assert sig["sacrebleu"]["direction"] == "worse" and sig["sacrebleu"]["p_value"] == 1.0
    assert sig["sacrebleu"]["p_value_worse"] == 0.0 and sig["sacrebleu"]["significant"]


def test_evaluate_baseline_without_output_is_noted_and_bad_spec_refused(tmp_path):
    tok_ref = _dataset(tmp_path)
    _generate_output(tmp_path / "sys.gen", list(enumerate(tok_ref)))
    evaluate.main(_args(tmp_path, "sys", baseline=f"shaw={tmp_path / 'nothing'}"))
    result = json.load(open(tmp_path / "sys" / "result.json"))
    assert "significance" not in result and list(result["significance_skipped"]) == ["shaw"]
    with pytest.raises(SystemExit):
        evaluate.main(_args(tmp_path, "sys", baseline=str(tmp_path / "base")))


def test_decode_time_and_training_speed_from_the_fairseq_logs(tmp_path):
    _write(tmp_path / "gen.log", ["INFO:fairseq_cli.generate:NOTE: hypothesis and token scores are output in base 2",
                                  "INFO:fairseq_cli.generate:Translated 3,003 sentences (88,412 tokens) in 41.7s "
                                  "(72.01 sentences/s, 2120.19 tokens/s)"])
    assert evaluate.decode_seconds(str(tmp_path / "gen.log")) == {"seconds": 41.7, "sentences": 3003, "tokens": 88412}
    _write(tmp_path / "train.log", [  # what fairseq writes to --log-file (--log-format simple)
        "epoch 001:    100 / 900 loss=9.1, nll_loss=9, ppl=512, wps=1000, ups=1.2, wpb=800",
        "epoch 001:    200 / 900 loss=8.1, nll_loss=8, ppl=256, wps=3000, ups=1.2, wpb=800",
        "epoch 001 | valid on 'valid' subset | loss 8.9 | nll_loss 8.9 | ppl 500.4 | wps 9999 | num_updates 200",
        "epoch 001:    300 / 900 loss=7.1, nll_loss=7, ppl=128, wps=2000, ups=1.2, wpb=800",
        "epoch 001 | loss 7.0 | nll_loss 7.0 | ppl 128 | wps 1500 | ups 1.2 | train_wall 5 | wall 7"])
    assert evaluate.train_speed(str(tmp_path / "train.log")) == {"wps": 2000.0, "lines": 3, "source": "train_inner"}
    _write(tmp_path / "short.log", [  # shorter than one log interval; a logging prefix does not matter
        "2026-01-01 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 9.344 | wps 0 | wpb 151",
        "2026-01-01 | INFO | train | epoch 001 | loss 9.296 | nll_loss 9.297 | wps 1720.1 | ups 2.3 | wpb 752"])
    assert evaluate.train_speed(str(tmp_path / "short.log")) == {"wps": 1720.1, "lines": 1, "source": "train"}
    with pytest.raises(ValueError, match="no 'Translated"):
        evaluate.decode_seconds(str(tmp_path / "short.log"))


def test_evaluate_lowercase_and_zh_conventions(tmp_path):
    _dataset(tmp_path, {"lowercase": True, "sacrebleu_tokenize": "zh", "detok": "none", "tokenized_bleu": False})
    refs = _read(tmp_path / "data" / "raw" / "test.en")
    _generate_output(tmp_path / "sys.gen", [(i, r.upper()) for i, r in enumerate(refs)])
    evaluate.main(_args(tmp_path, "sys"))
    result = json.load(open(tmp_path / "sys" / "result.json"))
    assert result["sacrebleu"]["score"] == 100.0
    assert "case:lc" in result["sacrebleu"]["signature"] and "tok:zh" in result["sacrebleu"]["signature"]
    assert "bleu_tok" not in result


def test_evaluate_rejects_foreign_output(tmp_path):
    _dataset(tmp_path)
    _write(tmp_path / "sys.gen", ["not a generate output"])
    with pytest.raises(SystemExit):
        evaluate.main(_args(tmp_path, "sys"))


# --- COMET / BLEURT hooks -----------------------------------------------------------------------

def test_hooks_report_unavailable(tmp_path, capsys):
    res = hooks.comet(str(tmp_path / "nope.ckpt"), sys.executable, "s", "h", "r")
    assert res == {"available": False, "reason": f"model path {tmp_path / 'nope.ckpt'} does not exist"}
    (tmp_path / "model").mkdir()
    res = hooks.bleurt(str(tmp_path / "model"), "no-such-python-xyz", "h", "r")
    assert not res["available"] and "not found" in res["reason"]
    res = hooks.comet(str(tmp_path / "model"), sys.executable, "s", "h", "r")  # comet not installed here
    assert not res["available"] and "comet" in res["reason"].lower()
    assert "COMET: unavailable" in capsys.readouterr().out


def _comet_stub(tmp_path):
    """A stand-in ``comet`` package in a separate path plays the metric's environment: a sentence scores
    1 when the hypothesis equals the reference, else 0."""
    pkg = tmp_path / "env" / "comet"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "class _Out:\n    def __init__(self, s): self.scores, self.system_score = s, sum(s) / len(s)\n"
        "class _Model:\n    def predict(self, data, batch_size, gpus):\n"
        "        return _Out([float(d['mt'] == d['ref']) for d in data])\n"
        "def load_from_checkpoint(path):\n    assert path.endswith('model.ckpt')\n    return _Model()\n")
    (tmp_path / "model.ckpt").write_text("x")
    return str(tmp_path / "env")


def test_comet_hook_runs_in_another_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", _comet_stub(tmp_path))
    for name, lines in (("s", ["a", "b"]), ("h", ["x", "y"]), ("r", ["x", "z"])):
        _write(tmp_path / name, lines)
    res = hooks.comet(str(tmp_path / "model.ckpt"), sys.executable, *(str(tmp_path / n) for n in "shr"))
    assert res["available"] and res["score"] == 0.5 and res["scores"] == [1.0, 0.0]


def test_comet_sentence_scores_are_bootstrapped_against_the_baseline(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", _comet_stub(tmp_path))
    tok_ref = _dataset(tmp_path, n=30)
    _generate_output(tmp_path / "base.gen", [(i, "the dog") for i in range(30)])
    _generate_output(tmp_path / "sys.gen", list(enumerate(tok_ref)))
    comet = {"comet_model": tmp_path / "model.ckpt", "comet_python": sys.executable}
    evaluate.main(_args(tmp_path, "base", **comet))
    evaluate.main(_args(tmp_path, "sys", baseline=f"transformer={tmp_path / 'base'}", bootstrap_samples=50, **comet))
    result = json.load(open(tmp_path / "sys" / "result.json"))
    assert result["comet"]["score"] == 1.0 and "scores" not in result["comet"]
    assert _read(tmp_path / "sys" / "comet.scores") == ["1.0"] * 30
    sig = result["significance"]["transformer"]["comet"]
    assert (sig["system"], sig["baseline"], sig["p_value"], sig["direction"]) == (1.0, 0.0, 0.0, "better")


def test_bootstrap_of_sentence_score_means():
    res = bootstrap.paired_bootstrap_means([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], samples=50)
    assert (res["system"], res["p_value"], res["p_value_worse"]) == (2.5, 1.0, 1.0)
    assert bootstrap.significance(res) is None
    res = bootstrap.paired_bootstrap_means([0.5] * 20, [0.4] * 20, samples=50)
    assert (res["p_value"], res["p_value_worse"], bootstrap.significance(res)) == (0.0, 1.0, "better")


# --- METEOR -------------------------------------------------------------------------------------

def test_meteor_on_known_sentences_or_says_why_not(capsys):
    """METEOR by hand: 'a cat sat' / 'the cat sat down': 2 matches in 1 chunk, P = 2/3, R = 1/2,
    F = PR / (0.9 P + 0.1 R) = 0.51282, penalty 0.5 (1/2)^3 = 0.0625 -> 48.08; an identical 6-word
    sentence: 1 - 0.5 (1/6)^3 -> 99.77; German 'die Häuser stehen' / 'das Haus steht': one stem match
    (Häuser, Haus) in 1 chunk, F = 1/3, penalty 0.5 -> 16.67."""
    try:
        import nltk  # noqa: F401
    except ImportError:
        res = meteor.meteor(["a cat sat"], ["the cat sat down"], "en")
        assert res == {"available": False, "reason": res["reason"]} and "nltk is not installed" in res["reason"]
        return
    res = meteor.meteor(["a cat sat", "the cat sat on the mat"], ["the cat sat down", "the cat sat on the mat"], "en")
    assert res["scores"] == [pytest.approx(48.0769, abs=1e-4), pytest.approx(99.7685, abs=1e-4)]
    assert res["score"] == 73.92 and "not meteor-1.5" in res["signature"]
    res = meteor.meteor(["die Häuser stehen"], ["das Haus steht"], "de")
    assert res["scores"] == [pytest.approx(100 / 6)] and "snowball-german" in res["signature"]


def test_meteor_unavailable_is_said_not_failed(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "nltk", None)  # as if nltk were not installed
    monkeypatch.setitem(sys.modules, "nltk.stem.snowball", None)
    res = meteor.meteor(["a b"], ["a b"], "de")
    assert not res["available"] and res["reason"].startswith("nltk is not installed (pip install nltk)")
    assert "METEOR: unavailable: nltk is not installed" in capsys.readouterr().out
    res = meteor.meteor(["a b"], ["a b"], "zh")
    assert not res["available"] and "no Snowball stemmer for target language 'zh'" in res["reason"]


# --- averaging window, plan parsing, tables -----------------------------------------------------

def _checkpoints(directory, updates, best, value=lambda u: float(u)):
    """Update checkpoints checkpoint_1_U.pt whose one weight is ``value(U)``, and checkpoint_best.pt at ``best``."""
    import torch

    os.makedirs(directory, exist_ok=True)
    for u in list(updates) + ["best"]:
        n = best if u == "best" else u
        state = {"model": {"w": torch.tensor([value(n)])}, "optimizer_history": [{"num_updates": n}],
                 "extra_state": {"val_loss": abs(n - best) + 1.0}, "last_optimizer_state": {"x": 1}}
        torch.save(state, os.path.join(directory, "checkpoint_best.pt" if u == "best" else f"checkpoint_1_{u}.pt"))


def test_best_and_following_checkpoints(tmp_path):
    """PosNet paper 5.3: the best checkpoint and the N-1 after it, else the last N."""
    d = str(tmp_path / "c")
    _checkpoints(d, range(300, 3301, 300), best=1500)  # 11 update checkpoints, 300 apart
    name = lambda paths: [os.path.basename(p) for p in paths]  # noqa: E731
    assert name(average_checkpoints.best_and_following(d, 3)) == [
        "checkpoint_1_1500.pt", "checkpoint_1_1800.pt", "checkpoint_1_2100.pt"]
    assert name(average_checkpoints.best_and_following(d, 7)) == [  # the best and all 6 after it
        f"checkpoint_1_{u}.pt" for u in range(1500, 3301, 300)]
    # only 6 checkpoints follow the best: not enough for 8, so the last 8
    assert name(average_checkpoints.best_and_following(d, 8)) == [
        f"checkpoint_1_{u}.pt" for u in range(1200, 3301, 300)]
    # a best saved between interval checkpoints (end of an epoch): checkpoint_best.pt itself and the next ones
    assert name(average_checkpoints.best_and_following(d, 2, best_update=1650)) == [
        "checkpoint_best.pt", "checkpoint_1_1800.pt"]
    with pytest.raises(ValueError, match="only 11 update checkpoints"):
        average_checkpoints.best_and_following(d, 12)


def test_best_and_following_refuses_when_the_followers_were_deleted(tmp_path):
    d = str(tmp_path / "c")
    _checkpoints(d, range(2400, 3301, 300), best=600)  # --keep-interval-updates kept 2400..3300 only
    with pytest.raises(ValueError, match="older than the update checkpoints kept"):
        average_checkpoints.best_and_following(d, 2)


def test_averaging_keeps_tied_embeddings_tied(tmp_path):
    import torch

    paths = []
    for i, value in enumerate((1.0, 3.0)):
        emb = torch.full((4, 2), value)
        state = {"model": {"encoder.embed_tokens.weight": emb, "decoder.output_projection.weight": emb,
                           "w": torch.full((2,), value)}, "optimizer_history": [{"num_updates": i}]}
        paths.append(str(tmp_path / f"c{i}.pt"))
        torch.save(state, paths[-1])
    out = average_checkpoints.average_checkpoints(paths)["model"]
    assert out["encoder.embed_tokens.weight"] is out["decoder.output_projection.weight"]
    assert out["w"].tolist() == [2.0, 2.0] and out["encoder.embed_tokens.weight"].eq(2.0).all()


def test_average_checkpoints_cli_averages_the_chosen_weights(tmp_path):
    import torch

    d = str(tmp_path / "c")
    _checkpoints(d, [2, 4, 6, 8], best=4, value=lambda u: {2: 1.0, 4: 10.0, 6: 20.0, 8: 40.0}[u])
    out = str(tmp_path / "avg.pt")
    average_checkpoints.main(["--inputs", d, "--output", out, "--best-and-following", "2"])
    state = torch.load(out, weights_only=True)
    assert state["model"]["w"].item() == 15.0 and state["last_optimizer_state"] is None  # (10 + 20) / 2
    average_checkpoints.main(["--inputs", d, "--output", out, "--num-update-checkpoints", "3"])
    assert torch.load(out, weights_only=True)["model"]["w"].item() == pytest.approx(70 / 3)
    with pytest.raises(SystemExit):
        average_checkpoints.main(["--inputs", d, "--output", out, "--best-and-following", "5"])


def test_train_commands_found_in_plans():
    plan = "\n".join([
        "# row a ds", "fairseq-train /d --arch x --lr 1 --log-file /x",
        "# row b ds", "python -m posnet_fairseq.table_runs.launch --procs 2 -- fairseq-train /d --arch y",
        "# row c ds", "torchrun --nnodes 2 -m fairseq_cli.train /d --arch z",
        "fairseq-generate /d --path p > out",
    ])
    found = plancheck.train_commands(plan)
    assert [(r, a[:3]) for r, a in found] == [("a", ["/d", "--arch", "x"]), ("b", ["/d", "--arch", "y"]),
                                               ("c", ["/d", "--arch", "z"])]


def test_plancheck_names_missing_arch_mixer_and_bad_flag():
    user = ["--user-dir", os.path.dirname(plancheck.__file__).rsplit(os.sep, 1)[0]]
    assert plancheck.check_command(["/d", "--arch", "posnet_transformer_tiny"] + user) == []
    assert plancheck.check_command(["/d", "--arch", "no_such_arch_xyz"] + user) == [
        "architecture no_such_arch_xyz is not registered"]
    assert "mixer nosuchmixer is not registered" in plancheck.check_command(
        ["/d", "--arch", "posnet_transformer_tiny", "--encoder-self-mixer", "mha,nosuchmixer"] + user)[0]
    problems = plancheck.check_command(["/d", "--arch", "posnet_transformer_tiny", "--no-such-flag"] + user)
    assert problems and "--no-such-flag" in problems[0]
    bad = plancheck.check_plan("# row r x\nfairseq-train /d --arch no_such_arch_xyz " + " ".join(user))
    assert plancheck.report(bad).startswith("missing architecture(s): no_such_arch_xyz")


def _result(path, **scores):
    os.makedirs(path, exist_ok=True)
    data = {k: {"score": v, "signature": f"sig-{k}"} for k, v in scores.items() if k != "params"}
    if "params" in scores:
        data["params"] = scores["params"]
    if path.endswith("rposnet/wmt14_en_de/test"):
        data["significance"] = {"transformer": {"sacrebleu": {"significant": True}, "comet": {"significant": False}}}
    with open(os.path.join(path, "result.json"), "w") as f:
        json.dump(data, f)


def test_table_collect_markdown_and_csv(tmp_path):
    res = str(tmp_path / "results")
    _result(f"{res}/transformer/wmt14_en_de/test", sacrebleu=27.1, bleurt=0.7123, comet=0.4801, params=66_512_384)
    _result(f"{res}/rposnet/wmt14_en_de/test", sacrebleu=27.6, bleurt=0.7, comet=0.5, params=63_000_000)
    md, csv_path = tables.write("posnet-table2", res, str(tmp_path / "t2"))
    text_md = open(md).read()
    # BLEURT and COMET times 100, as the paper; † marks rPosNet's sacreBLEU difference to the Transformer
    assert "| rPosNet | 63.00M | 63.9M | 27.60† | 26.6 | 70.00 | 71.4† | 50.00 | 48.6 |" in text_md
    assert "| Transformer | 66.51M | 66.5M | 27.10 | 26.3 | 71.23 | 71.1 | 48.01 | 47.6 | - | 37.8 |" in text_md
    assert "`‡`: differs from Shaw et al. (2018)" in text_md and "sig-sacrebleu" in text_md
    import csv

    rows = list(csv.reader(open(csv_path)))
    assert rows[0][:3] == ["Model", "Params (En-De) (ours)", "Params (En-De) (paper)"]
    assert rows[-1][:3] == ["rPosNet", "63.00M", "63.9M"] and len(rows) == 1 + len(tables.TABLES["posnet-table2"].rows)


def test_speed_columns_are_ratios_to_the_reference_row(tmp_path):
    res = str(tmp_path / "results")
    for row, seconds, wps in (("transformer", 60.0, 10000.0), ("aan_plus_avg", 48.0, 10300.0)):
        path = f"{res}/{row}/wmt14_en_de/test"
        os.makedirs(path)
        with open(os.path.join(path, "result.json"), "w") as f:
            json.dump({"decode_seconds": {"seconds": seconds}, "train_wps": {"wps": wps},
                       "meteor": {"available": False, "reason": "nltk is not installed"}}, f)
    header, rows = tables.collect("aan-table2", res)
    line = dict(zip(header, next(r for r in rows if r[0] == "AAN+ w/ AVG")))
    assert (line["ΔTrain (ours)"], line["ΔDecode (ours)"], line["ΔDecode (paper)"]) == ("1.03x", "1.25x", "1.32x")
    assert line["En-De METEOR (ours)"] == "n/a" and line["En-De BLEU (ours)"] == "-"


def _figures(table, row, *datasets):
    """The paper's figures of one row, without significance marks, keyed by metric (first dataset first)."""
    cells = tables.PAPER[table][row]
    out = {}
    for ds in datasets:
        out.update({k.split(":", 1)[1]: v.rstrip("†‡") for k, v in cells.items() if k.startswith(ds + ":")})
    return out


def test_paper_figures_agree_where_the_papers_repeat_them():
    """A transcription check: the papers print some models in several tables, with the same figures."""
    t2 = lambda row, ds="wmt14_en_de": _figures("posnet-table2", row, ds)  # noqa: E731
    for t4_row, t2_row in (("transformer", "transformer"), ("enc_dec", "rposnet")):
        t4 = _figures("posnet-table4", t4_row, "wmt14_en_de")
        assert t4 == {k: v for k, v in t2(t2_row).items() if k != "params"}, t4_row
    for row in ("lightconv", "rposnet"):
        t5 = _figures("posnet-table5", row, "wmt18_en_zh")
        assert {k: v for k, v in t5.items() if k != "params"} == t2(row, "wmt18_en_zh"), row
    for t6_row, t2_row in (("transformer", "transformer"), ("shaw", "shaw"), ("aposnet", "aposnet"),
                           ("rposnet", "rposnet")):
        assert _figures("posnet-table6", t6_row, "wmt14_en_de") == t2(t2_row), t6_row
    a2 = lambda row: {k: v for k, v in _figures("aan-table2", row, "wmt14_en_de").items()  # noqa: E731
                      if k in ("params", "bleu_tok", "meteor")}
    for t5_row, t2_row in (("transformer", "transformer"), ("ner_exp", "aan_plus_ner"), ("wet_exp", "aan_plus_wet")):
        assert _figures("aan-table5", t5_row, "wmt14_en_de") == a2(t2_row), t5_row
    for t6_row, t2_row in (("transformer", "transformer"), ("avg", "aan_plus_avg"), ("far", "aan_plus_far"),
                           ("ner", "aan_plus_ner"), ("wet", "aan_plus_wet")):
        t6 = _figures("aan-table6", t6_row, "wmt14_en_de")
        assert {k: v for k, v in t6.items() if k != "decode_speed"} == a2(t2_row), t6_row
    # WET's U (d x d per decoder layer) is the only parameter difference between the patterns
    for table, suffix, layers, d in (("aan-table2", "", 6, 512), ("aan-table7", "", 6, 512),
                                     ("aan-table4", "_deep", 12, 512), ("aan-table4", "_big", 6, 1024)):
        ds = "wmt14_en_fr" if table == "aan-table7" else "wmt14_en_de"
        wet, avg = (float(_figures(table, f"aan_plus_{p}{suffix}", ds)["params"].rstrip("M")) for p in ("wet", "avg"))
        assert abs((wet - avg) - layers * d * d / 1e6) < 0.015, (table, suffix)


def test_paper_numbers_only_for_rows_and_columns_that_exist():
    for name, rows in tables.PAPER.items():
        table = tables.TABLES[name]
        keys = {k for k, _ in table.rows}
        cols = {c.key for c in table.columns}
        for row, cells in rows.items():
            assert row in keys and set(cells) <= cols, (name, row)
