"""The quick start recipe (a posnet-compare call) end to end in micro mode (tiny
corpus, 3 epochs), then the README's Python snippet, run verbatim against what
the recipe produced."""
import csv
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


def assert_row_measures_the_run(row, run_dir):
    """The recipe's parameter count and scores, measured again from the files the run left."""
    arch = row["arch"]
    checkpoint = run_dir / "checkpoints" / arch / "checkpoint_avg.pt"
    models, _ = checkpoint_utils.load_model_ensemble([str(checkpoint)],
                                                     arg_overrides={"data": str(run_dir / "data-bin")})
    assert int(row["params"]) == sum(p.numel() for p in models[0].parameters())  # fairseq's count
    refs = (run_dir / "raw" / "test.tgt").read_text().splitlines()
    detok = {}
    for line in (run_dir / "gen" / f"{arch}.out").read_text().splitlines():
        if line.startswith("D-"):
            index, _, text = line[2:].split("\t", 2)
            detok[int(index)] = text
    hyps = [detok[i] for i in range(len(refs))]  # every test sentence was translated
    assert abs(float(row["bleu"]) - sacrebleu.corpus_bleu(hyps, [refs]).score) < 0.05
    assert abs(float(row["chrf"]) - sacrebleu.corpus_chrf(hyps, [refs]).score) < 0.05


def test_quickstart_then_readme_hub_snippet(tmp_path):
    run_dir = tmp_path / "runs" / "quickstart"
    env = dict(os.environ, POSNET_RUN_DIR=str(run_dir), POSNET_QUICKSTART_MICRO="1",
               POSNET_QUICKSTART_ARCHS="posnet_transformer_tiny")
    done = subprocess.run(["bash", os.path.join(REPO, "recipes", "quickstart.sh")], env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # posnet-compare's table, printed and written to results.md / results.csv
    assert "| `posnet_transformer_tiny` |" in done.stdout
    with open(run_dir / "results.csv", newline="") as f:
        row = next(csv.DictReader(f))
    assert row["arch"] == "posnet_transformer_tiny" and row["epochs"] == "3"
    assert_row_measures_the_run(row, run_dir)

    snippet = readme_snippet()
    done = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    translation = done.stdout.rstrip("\n").split("\n")[-1]
    # A few updates do not make a translator, but what comes out is target-language text.
    source_words = set(open(run_dir / "raw" / "train.src").read().split()) - {"."}
    assert not set(translation.split()) & source_words, translation
