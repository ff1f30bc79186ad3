"""The quick start recipe end to end (micro mode: tiny corpus, 3 epochs), then
the README's Python snippet, run verbatim against what the recipe produced."""
import os
import re
import subprocess
import sys

import sacrebleu
from fairseq import checkpoint_utils

import posnet_fairseq  # noqa: F401  (registers the architectures the checkpoint names)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def readme_snippet():
    text = open(os.path.join(REPO, "README.md")).read()
    match = re.search(r"<!-- hub-snippet -->\s*```python\n(.*?)```", text, re.S)
    assert match, "README.md lost its hub snippet"
    return match.group(1)


def assert_table_row_measures_the_run(row, run_dir):
    """Each figure of the recipe's results row, measured again from the files the run left."""
    arch, params, bleu, chrf, speed = row
    checkpoint = run_dir / "checkpoints" / arch / "checkpoint_avg.pt"
    models, _ = checkpoint_utils.load_model_ensemble([str(checkpoint)],
                                                     arg_overrides={"data": str(run_dir / "data-bin")})
    assert int(params.replace(",", "")) == sum(p.numel() for p in models[0].parameters())  # fairseq's count
    refs = (run_dir / "raw" / "test.tgt").read_text().splitlines()
    hyps = (run_dir / "gen" / f"{arch}.hyp").read_text().splitlines()
    assert len(hyps) == len(refs) == 500  # every test sentence, in order
    assert bleu == f"{sacrebleu.corpus_bleu(hyps, [refs], force=True).score:.1f}"  # force: as the recipe
    assert chrf == f"{sacrebleu.corpus_chrf(hyps, [refs]).score:.1f}"
    # sentences/s: the sentences over the (rounded) seconds of fairseq-generate's own report.
    log = (run_dir / "gen" / f"{arch}.log").read_text()
    sentences, seconds = re.search(r"Translated ([\d,]+) sentences \([\d,]+ tokens\) in ([\d.]+)s", log).groups()
    sentences, seconds = int(sentences.replace(",", "")), float(seconds)
    assert sentences == 500
    # Bounds from the printed precision: seconds to 0.1, sentences/s to 0.01.
    assert sentences / (seconds + 0.05) - 0.005 <= float(speed) <= sentences / max(seconds - 0.05, 1e-9) + 0.005


def test_quickstart_then_readme_hub_snippet(tmp_path):
    run_dir = tmp_path / "runs" / "quickstart"
    env = dict(os.environ, POSNET_RUN_DIR=str(run_dir), POSNET_QUICKSTART_MICRO="1",
               POSNET_QUICKSTART_ARCHS="posnet_transformer_tiny")
    done = subprocess.run(["bash", os.path.join(REPO, "recipes", "quickstart.sh")], env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    table = done.stdout.split("Results on the synthetic test set")[1]
    row = next(line for line in table.splitlines() if line.startswith("posnet_transformer_tiny"))
    assert_table_row_measures_the_run(row.split(), run_dir)

    snippet = readme_snippet()
    done = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    translation = done.stdout.rstrip("\n").split("\n")[-1]
    # A few updates do not make a translator, but what comes out is target-language text.
    source_words = set(open(run_dir / "raw" / "train.src").read().split()) - {"."}
    assert not set(translation.split()) & source_words, translation
