"""The quick start recipe (a posnet-compare call) end to end in micro mode (tiny
corpus, 3 epochs), then the README's Python snippet, run verbatim against what
the recipe produced."""
import csv
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def readme_snippet():
    text = open(os.path.join(REPO, "README.md")).read()
    match = re.search(r"<!-- hub-snippet -->\s*```python\n(.*?)```", text, re.S)
    assert match, "README.md lost its hub snippet"
    return match.group(1)


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
    assert int(row["params"]) > 0 and float(row["chrf"]) >= 0 and float(row["decode_30_sentences_per_s"]) > 0
    assert os.path.exists(run_dir / "checkpoints" / "posnet_transformer_tiny" / "checkpoint_avg.pt")

    snippet = readme_snippet()
    done = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    translation = done.stdout.rstrip("\n").split("\n")[-1]
    # A few updates do not make a translator, but what comes out is target-language text.
    source_words = set(open(run_dir / "raw" / "train.src").read().split()) - {"."}
    assert not set(translation.split()) & source_words, translation
