"""posnet_fairseq/evaluation/hooks.py: COMET and BLEURT run in their own environments, or say why not."""
import json
import sys

from posnet_fairseq.evaluation import evaluate, hooks

from files_testing import read_lines as _read, write_lines as _write
from test_evaluation_evaluate import _args, _dataset, _generate_output


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
