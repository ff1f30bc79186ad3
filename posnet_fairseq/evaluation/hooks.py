"""Optional learned metrics, COMET and BLEURT, run in a separate Python environment.

Both need packages that clash with this project's environment (COMET pins
numpy<2; the official BLEURT is TensorFlow), and both need model weights that
are downloaded by hand. So each hook takes a local model path and the python
interpreter of an environment where the metric is installed, runs a short
script there and reads one JSON line back: the system score and one score
per sentence (for the paired bootstrap). When anything is missing the result
says ``available: false`` with the reason, and nothing fails.

    COMET : pip install unbabel-comet (own venv); the PosNet paper scores with wmt20-comet-da:
            pass its checkpoint file (.../checkpoints/model.ckpt)
    BLEURT: pip install git+https://github.com/google-research/bleurt (TensorFlow) with the
            BLEURT-20 directory (the PosNet paper's), or bleurt-pytorch with a converted checkpoint
            directory

Both report scores as the metrics do (COMET about -1..1, BLEURT about 0..1);
the PosNet paper prints them times 100, and so do the tables.
"""
import json
import os
import shutil
import subprocess

_COMET = r"""
import json, sys
from comet import load_from_checkpoint
model_path, src, hyp, ref, batch_size, gpus = sys.argv[1:7]
read = lambda p: [l.rstrip("\n") for l in open(p, encoding="utf-8")]
data = [{"src": s, "mt": h, "ref": r} for s, h, r in zip(read(src), read(hyp), read(ref))]
out = load_from_checkpoint(model_path).predict(data, batch_size=int(batch_size), gpus=int(gpus))
print(json.dumps({"score": float(out.system_score), "scores": [float(x) for x in out.scores]}))
"""

_BLEURT = r"""
import json, sys
model_path, hyp, ref, batch_size = sys.argv[1:5]
read = lambda p: [l.rstrip("\n") for l in open(p, encoding="utf-8")]
hyps, refs = read(hyp), read(ref)
try:
    from bleurt import score as bleurt_score
except ImportError:
    import torch
    from bleurt_pytorch import BleurtForSequenceClassification, BleurtTokenizer
    model = BleurtForSequenceClassification.from_pretrained(model_path).eval()
    tokenizer = BleurtTokenizer.from_pretrained(model_path)
    scores = []
    with torch.no_grad():
        for i in range(0, len(refs), int(batch_size)):
            batch = tokenizer(refs[i:i + int(batch_size)], hyps[i:i + int(batch_size)],
                              padding="longest", truncation=True, return_tensors="pt")
            scores.extend(model(**batch).logits.flatten().tolist())
    implementation = "bleurt-pytorch"
else:
    scores = bleurt_score.BleurtScorer(model_path).score(references=refs, candidates=hyps,
                                                          batch_size=int(batch_size))
    implementation = "bleurt (TensorFlow)"
print(json.dumps({"score": sum(scores) / max(len(scores), 1), "scores": [float(x) for x in scores],
                  "implementation": implementation}))
"""


def _unavailable(metric, reason):
    print(f"{metric}: unavailable: {reason}")
    return {"available": False, "reason": reason}


def _run(metric, python, model_path, script, args):
    if not model_path:
        return _unavailable(metric, "no model path given")
    if not os.path.exists(model_path):
        return _unavailable(metric, f"model path {model_path} does not exist")
    interpreter = shutil.which(python) if python else None
    if interpreter is None:
        return _unavailable(metric, f"python interpreter {python!r} not found (give the metric's own environment)")
    proc = subprocess.run([interpreter, "-c", script, model_path, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["exit status %d" % proc.returncode])[-1]
        return _unavailable(metric, f"{interpreter} failed: {last}")
    try:
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return _unavailable(metric, f"{interpreter} printed no score")
    result.update(available=True, model=model_path, python=interpreter)
    return result


def comet(model_path, python, src, hyp, ref, batch_size=8, gpus=0):
    return _run("COMET", python, model_path, _COMET, [src, hyp, ref, str(batch_size), str(gpus)])


def bleurt(model_path, python, hyp, ref, batch_size=16):
    return _run("BLEURT", python, model_path, _BLEURT, [hyp, ref, str(batch_size)])
