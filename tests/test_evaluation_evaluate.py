"""posnet_fairseq/evaluation/evaluate.py: scoring fairseq-generate output as the papers do (sacreBLEU, tokenized BLEU,
compound splitting, significance against baselines), and decoding time and training speed from fairseq's logs
(posnet_fairseq.fairseq_log)."""
import json
import os

import pytest

from posnet_fairseq import fairseq_log
from posnet_fairseq.evaluation import evaluate

from files_testing import read_lines as _read, write_lines as _write


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
    assert fairseq_log.decode_seconds(str(tmp_path / "gen.log")) == {"seconds": 41.7, "sentences": 3003,
                                                                       "tokens": 88412}
    _write(tmp_path / "train.log", [  # what fairseq writes to --log-file (--log-format simple)
        "epoch 001:    100 / 900 loss=9.1, nll_loss=9, ppl=512, wps=1000, ups=1.2, wpb=800",
        "epoch 001:    200 / 900 loss=8.1, nll_loss=8, ppl=256, wps=3000, ups=1.2, wpb=800",
        "epoch 001 | valid on 'valid' subset | loss 8.9 | nll_loss 8.9 | ppl 500.4 | wps 9999 | num_updates 200",
        "epoch 001:    300 / 900 loss=7.1, nll_loss=7, ppl=128, wps=2000, ups=1.2, wpb=800",
        "epoch 001 | loss 7.0 | nll_loss 7.0 | ppl 128 | wps 1500 | ups 1.2 | train_wall 5 | wall 7"])
    assert fairseq_log.train_speed(str(tmp_path / "train.log")) == {"wps": 2000.0, "lines": 3, "source": "train_inner"}
    _write(tmp_path / "short.log", [  # shorter than one log interval; a logging prefix does not matter
        "2026-01-01 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 9.344 | wps 0 | wpb 151",
        "2026-01-01 | INFO | train | epoch 001 | loss 9.296 | nll_loss 9.297 | wps 1720.1 | ups 2.3 | wpb 752"])
    assert fairseq_log.train_speed(str(tmp_path / "short.log")) == {"wps": 1720.1, "lines": 1, "source": "train"}
    with pytest.raises(ValueError, match="no 'Translated"):
        fairseq_log.decode_seconds(str(tmp_path / "short.log"))


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
