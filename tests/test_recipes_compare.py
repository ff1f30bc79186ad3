"""recipes/compare/*.sh: the posnet-compare runs of docs/compare.md and of the length study
(docs/length-generalisation.md), as their --dry-run prints them (no corpus
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


def recipe(*args, cwd, script=BIBLE):
    env = dict(os.environ, PYTHON=sys.executable)
    env.pop("OMP_NUM_THREADS", None)
    return subprocess.run(["bash", script, *args], env=env, capture_output=True, text=True, cwd=cwd)


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


STUDY = os.path.join(REPO, "recipes", "compare", "length-study.sh")
CONCAT = ["--task", "translation_concat", "--concat-max-pairs", "3", "--concat-rate", "0.5"]
GRID = ["posnet_transformer_tiny", "posnet_transformer_tiny+shape", "posnet_transformer_tiny+randomized",
        "posnet_transformer_tiny+concat", "rope_transformer_tiny", "rope_transformer_tiny+randomized",
        "rope_transformer_tiny+yarn", "rope_transformer_tiny+concat", "rope_transformer_tiny+randconcat",
        "alibi_transformer_tiny",
        "alibi_seq2seq_transformer_tiny", "kerple_transformer_tiny", "fire_transformer_tiny", "dpb_transformer_tiny",
        "xpos_transformer_tiny", "nope_transformer_tiny", "t5bias_transformer_tiny", "aposnet_transformer_tiny",
        "aposnet_transformer_tiny+concat", "rposnet_transformer_tiny"]


def study_commands(*args, cwd):
    """{corpus: posnet-compare's argv} of the study's --dry-run."""
    done = recipe("--dry-run", *args, cwd=cwd, script=STUDY)
    assert done.returncode == 0, done.stderr
    assert os.listdir(cwd) == []  # a dry run writes nothing
    commands = {}
    for line in done.stdout.splitlines():
        words = shlex.split(line)
        assert words[:5] == ["OMP_NUM_THREADS=1", f"PYTHONPATH={REPO}", sys.executable, "-m",
                             "posnet_fairseq.cli.compare"]
        argv = words[5:]
        commands[os.path.basename(argv[argv.index("--out") + 1])] = argv
    return commands


def arch_flags(args):
    return {spec.partition("=")[0]: shlex.split(spec.partition("=")[2]) for spec in args.arch_flags}


def generate_flags(args):
    return {spec.partition("=")[0]: shlex.split(spec.partition("=")[2]) for spec in args.arch_generate_flags}


def test_the_study_is_the_grid_on_both_corpora_and_every_model_builds(tmp_path):
    commands = study_commands("--data", "corpus", "--seeds", "3", "--budget", "converge:40e", cwd=tmp_path)
    assert list(commands) == ["synthetic", "bible"]
    for argv in commands.values():
        assert argv[-4:] == ["--seeds", "3", "--budget", "converge:40e"]  # passed through, last
    parser = options.build_parser()
    synthetic = parser.parse_args(commands["synthetic"][:-4])
    assert (synthetic.train_max_len, synthetic.test_max_len, synthetic.out) == (20, 50, "runs/length-study/synthetic")
    flags = arch_flags(synthetic)
    assert flags["posnet_transformer_tiny+shape"] == ["--encoder-position-augmentation", "shape",
                                                      "--decoder-position-augmentation", "shape"]
    assert flags["rope_transformer_tiny+randomized"][-1] == "randomized"
    assert flags["rope_transformer_tiny+concat"] == flags["aposnet_transformer_tiny+concat"] == CONCAT
    # translated with spread test positions, trained with them too, so that validation measures them
    assert flags["rope_transformer_tiny+randconcat"] == (flags["rope_transformer_tiny+randomized"]
                                                         + ["--randomized-test-positions", "spread"] + CONCAT)
    # RoPE's own training, translated with YaRN, scaled per sentence beyond the longest training source (EOS
    # included)
    assert "rope_transformer_tiny+yarn" not in flags
    assert generate_flags(synthetic) == {
        "rope_transformer_tiny+yarn": [
            "--model-overrides", "{'rope_scaling': 'yarn', 'rope_scaling_factor': 'auto', 'rope_scaling_train_length': 21}"]}
    # posnet-compare's own checks: every name and architecture exists, every model builds with its flags
    synthetic.out = str(tmp_path / "o")
    checked = options.check_args(parser, synthetic)
    assert checked.arch_list == GRID
    bible = parser.parse_args(commands["bible"][:-4])
    assert bible.archs == synthetic.archs
    assert (bible.raw, bible.raw_test) == (["corpus/raw/train.es", "corpus/raw/train.en"],
                                           ["corpus/raw/test.es", "corpus/raw/test.en"])
    assert (bible.train_max_len, bible.concat_test, bible.out) == (32, 4, "runs/length-study/bible")
    assert generate_flags(bible)["rope_transformer_tiny+yarn"][-1].endswith("'rope_scaling_train_length': 33}")
    assert arch_flags(bible) == flags


def test_study_options_and_errors(tmp_path):
    commands = study_commands("--corpus", "bible", "--models", "rope_transformer_tiny+yarn,nope_transformer_tiny",
                              "--concat-test", "8", "--out", "o", cwd=tmp_path)
    args = options.build_parser().parse_args(commands["bible"])
    # the baseline stays first; the grid's order is kept
    assert args.archs.split(",") == ["posnet_transformer_tiny", "rope_transformer_tiny+yarn", "nope_transformer_tiny"]
    assert (args.concat_test, args.out, list(generate_flags(args))) == (8, "o/bible", ["rope_transformer_tiny+yarn"])
    assert list(study_commands("--corpus", "synthetic", cwd=tmp_path)) == ["synthetic"]
    for argv, message in ((["--models", "foo"], "--models: foo is not a model of the study"),
                          (["--corpus", "x"], "--corpus x: choose synthetic, bible or both"),
                          (["--data", "nowhere"], "--data nowhere: no prepared corpus (no stats.json)"),
                          (["--out"], "--out needs a value")):
        done = recipe(*argv, cwd=tmp_path, script=STUDY)
        assert done.returncode == 1 and message in done.stderr, done.stderr
    assert os.listdir(tmp_path) == []  # refused before anything ran


def test_the_study_rope_with_scaling_reads_training_lengths_as_rope():
    """rope_transformer_tiny+yarn of the grid: with the factor auto, max(1, n / L), a source of at most L
    tokens (every training source) is not scaled, so the model reads it as plain RoPE does; a longer one is."""
    import torch

    from posnet_fairseq.benchmark.training_step import build_model, dictionary

    vocab = dictionary(30)
    scaled = ["--rope-scaling", "yarn", "--rope-scaling-factor", "auto", "--rope-scaling-train-length", "21"]
    models = [build_model(["--arch", "rope_transformer_tiny", *flags], vocab, seed=1)[0] for flags in ([], scaled)]
    differences = []
    for n in (12, 21, 35):
        torch.manual_seed(0)
        source = torch.randint(4, 30, (2, n))
        source[:, -1] = vocab.eos()
        previous = torch.randint(4, 30, (2, 15))
        outputs = []
        for model in models:
            torch.manual_seed(1)  # the same dropout masks
            outputs.append(model(source, torch.tensor([n, n]), previous)[0])
        differences.append((outputs[0] - outputs[1]).abs().max().item())
    assert differences[:2] == [0.0, 0.0]
    assert differences[2] > 1e-3


def test_both_recipes_balance_kept_by_book_where_the_corpus_has_test_book(tmp_path):
    """recipes/data/prepare-bible-es-en.sh writes DATA/raw/test.book: the Bible commands then pass it as
    --test-groups; a corpus without it gets the command as before."""
    corpus, cwd = tmp_path / "corpus", tmp_path / "cwd"
    (corpus / "raw").mkdir(parents=True), cwd.mkdir()
    parser = options.build_parser()

    def groups():
        bible = parser.parse_args(shlex.split(recipe("--dry-run", "--data", str(corpus), cwd=cwd).stdout)[5:])
        study = parser.parse_args(study_commands("--corpus", "bible", "--data", str(corpus), cwd=cwd)["bible"])
        return bible.test_groups, study.test_groups

    assert groups() == (None, None)
    (corpus / "raw" / "test.book").write_text("Ruth\n")
    assert groups() == (f"{corpus}/raw/test.book",) * 2
