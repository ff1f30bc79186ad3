"""recipes/compare/*.sh: the posnet-compare runs of docs/compare.md, as their --dry-run prints them (no corpus
or Debian package needed). The printed command must be one posnet-compare accepts: its flags parse and its
architectures exist."""
import os
import shlex
import subprocess
import sys

from posnet_fairseq.compare import options

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIBLE = os.path.join(REPO, "recipes", "compare", "bible-es-en.sh")
EIGHT = ["posnet_transformer_tiny", "rposnet_transformer_tiny", "aposnet_transformer_tiny", "hc_gaussian_tiny",
         "aan_plus_avg_tiny", "tisa_transformer_tiny", "rope_transformer_tiny", "alibi_transformer_tiny"]


def recipe(*args, cwd):
    env = dict(os.environ, PYTHON=sys.executable)
    env.pop("OMP_NUM_THREADS", None)
    return subprocess.run(["bash", BIBLE, *args], env=env, capture_output=True, text=True, cwd=cwd)


def test_bible_dry_run_is_the_es_en_comparison_with_joined_tests(tmp_path):
    done = recipe("--dry-run", "--data", "corpus", "--seeds", "3", "--budget", "converge:40e", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert os.listdir(tmp_path) == []  # a dry run writes nothing
    words = shlex.split(done.stdout)
    assert words[:2] == ["OMP_NUM_THREADS=1", f"PYTHONPATH={REPO}"]
    assert words[2:5] == [sys.executable, "-m", "posnet_fairseq.cli.compare"]
    argv = words[5:]
    # the extra flags come last, as given: a flag given twice is the later one's
    assert argv[-4:] == ["--seeds", "3", "--budget", "converge:40e"]
    args = options.build_parser().parse_args(argv[:-4])
    assert args.archs.split(",") == EIGHT
    assert args.raw == ["corpus/raw/train.es", "corpus/raw/train.en"]
    assert args.raw_valid == ["corpus/raw/valid.es", "corpus/raw/valid.en"]
    assert args.raw_test == ["corpus/raw/test.es", "corpus/raw/test.en"]
    assert (args.train_max_len, args.concat_test, args.out) == (32, 4, "runs/bible-es-en")
    from fairseq.models import ARCH_MODEL_REGISTRY

    import posnet_fairseq  # noqa: F401  (registers the architectures)

    assert all(arch in ARCH_MODEL_REGISTRY for arch in EIGHT)


def test_bible_recipe_options_and_a_missing_corpus(tmp_path):
    done = recipe("--dry-run", "--archs", "a,b", "--concat-test", "8", "--out", "o", "--jobs", "2", cwd=tmp_path)
    argv = shlex.split(done.stdout)[5:]
    args = options.build_parser().parse_args(argv)
    assert (args.archs, args.concat_test, args.out, args.jobs) == ("a,b", 8, "o", 2)
    done = recipe("--data", "nowhere", cwd=tmp_path)
    assert done.returncode == 1
    assert "--data nowhere: no prepared corpus (no stats.json); build it with: bash " in done.stderr
    assert "recipes/data/prepare-bible-es-en.sh --out nowhere" in done.stderr
    assert recipe("--out", cwd=tmp_path).stderr.strip().endswith("--out needs a value")
