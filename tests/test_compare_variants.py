"""posnet-compare models named ARCH+LABEL (posnet_fairseq/compare/model_flags.py): one architecture twice in a
run, each with its own flags: parsed and checked, given to fairseq as the architecture, and trained, scored and
reported under its own name in a micro run."""
import csv
import json
import shlex

import pytest
import torch

from posnet_fairseq.compare import model_flags, options, training
from posnet_fairseq.compare import recipe as recipes
from tests.test_compare import CHEAP, run_compare

SHAPE = "posnet_transformer_tiny+shape"
SHAPE_FLAGS = "--encoder-position-augmentation shape --decoder-position-augmentation shape --shape-max-offset 5"


def test_a_name_is_its_architecture_and_a_label():
    assert model_flags.architecture(SHAPE) == "posnet_transformer_tiny"
    assert model_flags.architecture("rope_transformer_tiny") == "rope_transformer_tiny"
    assert model_flags.refused_name(SHAPE) is None and model_flags.refused_name("rope_transformer_tiny") is None
    # a label names files and must not look like a seed's suffix or a path
    for bad in ("rope_transformer_tiny+", "rope_transformer_tiny+a.seed2", "rope_transformer_tiny+a/b"):
        assert "the label after '+' must be letters, digits" in model_flags.refused_name(bad)


def parse(argv, tmp_path):
    p = options.build_parser()
    return options.check_args(p, p.parse_args(["--out", str(tmp_path / "o"), *argv]))


def test_the_same_architecture_twice_with_its_own_flags(tmp_path):
    args = parse(["--archs", f"posnet_transformer_tiny,{SHAPE}", "--arch-flags", f"{SHAPE}={SHAPE_FLAGS}"], tmp_path)
    assert args.arch_list == ["posnet_transformer_tiny", SHAPE]
    assert args.flags == {"posnet_transformer_tiny": [], SHAPE: shlex.split(SHAPE_FLAGS)}
    command = recipes.train_command("bin", "save", SHAPE, args.flags[SHAPE], recipes.Recipe(),
                                     recipes.Budget.parse("1u"))
    assert command[command.index("--arch") + 1] == "posnet_transformer_tiny"  # fairseq is given the architecture
    assert command[-len(args.flags[SHAPE]):] == args.flags[SHAPE]


@pytest.mark.parametrize("archs, flags, message", [
    ("posnet_transformer_tiny,nosuch_tiny+x", [], "unknown architecture nosuch_tiny"),
    ("posnet_transformer_tiny,posnet_transformer_tiny+a.b", [], "posnet_transformer_tiny+a.b: the label after '+'"),
    (f"posnet_transformer_tiny,{SHAPE}", ["--arch-flags", f"{SHAPE}=--encoder-position-augmentation foo"],
     f"model flags refused (nothing was prepared): {SHAPE}: argument --encoder-position-augmentation"),
])
def test_a_bad_name_or_flag_names_the_model(tmp_path, capsys, archs, flags, message):
    with pytest.raises(SystemExit):
        parse(["--archs", archs, *flags], tmp_path)
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("flags", ["--cross-mixer rposnet",
                                   "--encoder-position-augmentation randomized --decoder-position-augmentation "
                                   "randomized --randomized-test-positions spread"])
def test_flags_whose_model_needs_the_length_ratio_are_checked_before_any_data(tmp_path, flags):
    """fairseq-train computes their length ratio from the training set; the check, made before the data, was
    refused with 'cannot compute the length ratio'. A bad flag beside them is still told. The cost report's
    training step, also built without data, was refused the same way (the length study's Bible run, 2026-11-28):
    it runs one."""
    from posnet_fairseq.benchmark.training_step import TrainingStep

    model = "posnet_transformer_tiny+gamma"
    args = parse(["--archs", model, "--arch-flags", f"{model}={flags}"], tmp_path)
    assert args.flags == {model: shlex.split(flags)}
    errors, _ = model_flags.check({model: [*shlex.split(flags), "--shape-max-offset", "0"]})
    assert "--shape-max-offset" in errors[model]
    step = TrainingStep("posnet_transformer_tiny", 2, 6, 64, shlex.split(flags))
    before = [p.detach().clone() for p in step.model.parameters()]
    step()
    assert any(not torch.equal(a, b) for a, b in zip(before, step.model.parameters()))


def test_a_model_translated_with_spread_positions_but_validated_without_them_is_noted():
    """Its validation loss, on positions it is not translated with, picks its checkpoints and stops it (the
    length study's randomized + concatenated RoPE on the Bible corpus, 2026-11-28); set in training as well (in
    either form argparse takes), or not at all, nothing is noted."""
    randomized = shlex.split("--encoder-position-augmentation randomized --decoder-position-augmentation randomized")
    spread = ["--model-overrides", "{'randomized_test_positions': 'spread'}"]
    flags = {"a": randomized, "b": [*randomized, "--randomized-test-positions", "spread"], "c": randomized,
             "d": [*randomized, "--randomized-test-positions", "plain"],
             "e": [*randomized, "--randomized-test-positions=spread"]}
    notes = model_flags.validated_otherwise(flags, {"a": spread, "b": spread, "c": [], "d": spread, "e": spread})
    assert set(notes) == {"a", "d"}
    assert notes["a"] == ("a is translated with randomized_test_positions 'spread' (--arch-generate-flags) but "
                          "validated in training with another value (--patience and the best checkpoints go by that "
                          "loss); pass --randomized-test-positions spread in --arch-flags to validate it as it is "
                          "translated")


def test_a_micro_run_trains_and_reports_both_under_their_names(tmp_path):
    out = tmp_path / "run"
    run_compare(["--archs", f"posnet_transformer_tiny,{SHAPE}", "--arch-flags", f"{SHAPE}={SHAPE_FLAGS}",
                 "--out", str(out), "--budget", "2u", "--train-pairs", "60", "--valid", "6", "--test", "12",
                 "--train-max-len", "10", "--vocab-size", "200", "--interval", "1", "--decode-lengths", "8",
                 "--jobs", "1", "--min-bucket-sentences", "2", *CHEAP])
    with open(out / "results.csv", newline="") as f:
        rows = {row["arch"]: row for row in csv.DictReader(f)}
    assert list(rows) == ["posnet_transformer_tiny", SHAPE]
    assert rows[SHAPE]["bleu"] and rows[SHAPE]["train_speed_ratio"]
    cfg = {name: torch.load(out / "checkpoints" / name / training.AVERAGE, weights_only=False)["cfg"]["model"]
           for name in rows}
    get = {name: (c.get if hasattr(c, "get") else lambda key, c=c: getattr(c, key)) for name, c in cfg.items()}
    assert get[SHAPE]("arch") == get["posnet_transformer_tiny"]("arch") == "posnet_transformer_tiny"
    assert (get[SHAPE]("encoder_position_augmentation"), get[SHAPE]("shape_max_offset")) == ("shape", 5)
    assert get["posnet_transformer_tiny"]("encoder_position_augmentation") == "none"


YARN = "rope_transformer_tiny+yarn"
YARN_OVERRIDES = ("--model-overrides \"{'rope_scaling': 'yarn', 'rope_scaling_factor': 'auto', "
                  "'rope_scaling_train_length': 11}\"")


@pytest.mark.parametrize("spec, message", [
    ("nosuch_tiny=--beam 2", "expected ARCH=FLAGS with ARCH one of --archs"),
    (f"{YARN}=--rope-scaling yarn", "fairseq-generate has no flag --rope-scaling (a model flag is given at "
                                    "generation as --model-overrides"),
])
def test_bad_generation_flags_name_the_flag(tmp_path, capsys, spec, message):
    with pytest.raises(SystemExit):
        parse(["--archs", f"rope_transformer_tiny,{YARN}", "--arch-generate-flags", spec], tmp_path)
    assert message in capsys.readouterr().err


def test_a_variant_that_differs_in_how_it_translates_shares_the_training(tmp_path):
    """RoPE and RoPE + YaRN scaling at generation (--model-overrides, the factor chosen per sentence): one
    training, both translated (the variant with its own flags), both reported; a re-run redoes nothing."""
    out = tmp_path / "run"
    argv = ["--archs", f"rope_transformer_tiny,{YARN}", "--arch-generate-flags", f"{YARN}={YARN_OVERRIDES}",
            "--out", str(out), "--budget", "2u", "--train-pairs", "60", "--valid", "6", "--test", "12",
            "--train-max-len", "10", "--vocab-size", "200", "--interval", "1", "--decode-lengths", "8",
            "--jobs", "1", "--min-bucket-sentences", "2", *CHEAP]
    printed = run_compare(argv)
    assert printed.count("train: starting") == 1, printed
    assert f"train: {YARN} shares the training of rope_transformer_tiny" in printed
    checkpoints = {name: out / "checkpoints" / name / training.AVERAGE for name in ("rope_transformer_tiny", YARN)}
    assert checkpoints[YARN].read_bytes() == checkpoints["rope_transformer_tiny"].read_bytes()
    with open(out / "results.csv", newline="") as f:
        rows = {row["arch"]: row for row in csv.DictReader(f)}
    assert list(rows) == ["rope_transformer_tiny", YARN] and rows[YARN]["bleu"]
    assert rows[YARN]["trained_as"] == "rope_transformer_tiny" and rows[YARN]["updates"] == "2"
    # a training of its own is recorded as before shared trainings existed (an earlier version resumes it)
    results = {name: json.loads((out / "steps" / f"train--{name}.json").read_text())["result"]
               for name in checkpoints}
    assert "trained_as" not in results["rope_transformer_tiny"]
    assert results[YARN] == dict(results["rope_transformer_tiny"], trained_as="rope_transformer_tiny")
    # fairseq-generate was given the overrides for the variant only, and they took effect: the same model
    # scores a sentence alike up to the training length (factor 1) and otherwise beyond it
    flags = {name: json.loads((out / "steps" / f"translate--{name}.json").read_text())["settings"]["flags"]
             for name in checkpoints}
    assert flags[YARN] == flags["rope_transformer_tiny"] + shlex.split(YARN_OVERRIDES)
    scores = {name: {line.split("\t")[0]: float(line.split("\t")[1]) for line in (out / "gen" / f"{name}.out").open()
                     if line.startswith("H-")} for name in checkpoints}
    # alike up to float rounding: at factor 1 the per-sentence path turns each sentence by its own rotation
    # (other products, and YaRN's blend at s = 1), whose last bits depend on the machine's kernels (2e-7 on an
    # AVX512 machine); a scaled sentence moves its score by 1e-2 and more
    same = [i for i in scores[YARN] if abs(scores[YARN][i] - scores["rope_transformer_tiny"][i]) < 1e-5]
    assert 0 < len(same) < len(scores[YARN]), scores
    assert f"`{YARN}` shares the training of `rope_transformer_tiny`" in (out / "results.md").read_text()
    # its decoding is timed with its flags too (and the cost measured again were they changed)
    cost = json.loads((out / "steps" / "cost.json").read_text())["settings"]
    assert cost["generate_flags"] == {YARN: shlex.split(YARN_OVERRIDES)}
    again = run_compare(argv)
    assert "train: starting" not in again and f"train: skipped {YARN}, finished earlier" in again
    assert f"translate: skipped {YARN}, translated earlier" in again


@pytest.mark.parametrize("overrides, message", [
    ("{'rope_scaling': 'ntk', 'rope_scaling_factor': 2}",
     "posnet_transformer_tiny+yarn: --rope-scaling ntk: the model has no rope mixer"),
    ("{'rope_scaling': 'yarn', 'rope_scaling_factor': 'auto'}",
     "posnet_transformer_tiny+yarn: --rope-scaling-factor auto: needs --rope-scaling-train-length"),
    ("{'encoder_self_mixer': 'rposnet'}",
     "posnet_transformer_tiny+yarn: --model-overrides changes how a model decodes, not what it is"),
])
def test_a_variants_model_overrides_are_checked_with_its_model(tmp_path, capsys, overrides, message):
    """Issue 49 item 6: a posnet_transformer_tiny+yarn variant got its own row, translated as without the
    scaling, with no warning."""
    with pytest.raises(SystemExit):
        parse(["--archs", "posnet_transformer_tiny,posnet_transformer_tiny+yarn", "--arch-generate-flags",
               f"posnet_transformer_tiny+yarn=--model-overrides \"{overrides}\""], tmp_path)
    assert "model flags refused (nothing was prepared): " + message in capsys.readouterr().err


AA = "posnet_transformer_tiny+aa"


@pytest.mark.parametrize("spec, message", [
    (f"{AA}", "expected NAME=N with NAME one of --archs and N an integer >= 1"),
    ("rope_transformer_tiny=1", "expected NAME=N with NAME one of --archs"),
    (f"{AA}=0", "N an integer >= 1"),
    (f"{AA}=two", "N an integer >= 1"),
])
def test_a_bad_seed_offset_names_the_flag(tmp_path, capsys, spec, message):
    with pytest.raises(SystemExit):
        parse(["--archs", f"posnet_transformer_tiny,{AA}", "--seed-offset", spec], tmp_path)
    err = capsys.readouterr().err
    assert f"--seed-offset {spec!r}: expected NAME=N" in err and message in err


def test_a_seed_offset_given_twice_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        parse(["--archs", f"posnet_transformer_tiny,{AA}", "--seed-offset", f"{AA}=3", "--seed-offset", f"{AA}=4"],
              tmp_path)
    assert f"--seed-offset '{AA}=4': {AA} is given an offset twice" in capsys.readouterr().err


def test_a_model_of_a_seed_offset_trains_with_other_seeds_and_shares_no_training(tmp_path):
    """Issue 47 item 6, the A/A check: ARCH+aa is ARCH under another label, with the same flags; without
    --seed-offset it shares ARCH's training (the rule for variants), with it each seed s trains with s + N
    under the same names, and never shares a training, not even with the baseline's model of the seed s + N."""
    from posnet_fairseq.compare import run, seeds
    from posnet_fairseq.compare.steps import Steps

    argv = ["--archs", f"posnet_transformer_tiny,{AA}", "--seeds", "3", "--device", "cpu", "--jobs", "1"]
    models = [seeds.key(a, s, 1) for s in (1, 2, 3) for a in ("posnet_transformer_tiny", AA)]
    flags = {model: [] for model in models}

    def trainer(args):
        return training.Trainer(Steps(tmp_path / "o"), "bin", args.budget_obj, recipes.Recipe(), args.plan,
                                print, split=lambda model: seeds.split(model, args.seed),
                                seed_offsets=args.seed_offsets)

    plain = trainer(parse(argv, tmp_path))
    assert plain.followers(models, flags) == {AA: "posnet_transformer_tiny",
                                              f"{AA}.seed2": "posnet_transformer_tiny.seed2",
                                              f"{AA}.seed3": "posnet_transformer_tiny.seed3"}
    args = parse([*argv, "--seed-offset", f"{AA}=1"], tmp_path)
    assert args.seed_offsets == {AA: 1}
    offset = trainer(args)
    assert offset.followers(models, flags) == {}
    assert {model: offset.recipe_of(model).seed for model in models} == {
        "posnet_transformer_tiny": 1, "posnet_transformer_tiny.seed2": 2, "posnet_transformer_tiny.seed3": 3,
        AA: 2, f"{AA}.seed2": 3, f"{AA}.seed3": 4}
    assert offset.settings(f"{AA}.seed2", [])["seed"] == 3
    # two labels with the same offset, architecture and flags still share (they differ in how they translate)
    twin = "posnet_transformer_tiny+twin"
    args = parse(["--archs", f"posnet_transformer_tiny,{AA},{twin}", "--seed-offset", f"{AA}=1", "--seed-offset",
                  f"{twin}=1", "--device", "cpu", "--jobs", "1"], tmp_path)
    assert trainer(args).followers(["posnet_transformer_tiny", AA, twin], {m: [] for m in args.arch_list}) == \
        {twin: AA}
    # results.md's settings line says which model ran with which seeds
    args = parse([*argv, "--seed-offset", f"{AA}=1"], tmp_path)
    assert run._budget_line(args).startswith(
        "5 epochs per model; seeds 1, 2, 3 (every model once per seed; data seed 1); "
        f"`{AA}` with the seeds 2, 3, 4 (--seed-offset 1); Adam")
    assert "--seed-offset" not in run._budget_line(parse(argv, tmp_path))


def test_a_rerun_that_changes_a_seed_offset_is_refused(tmp_path):
    """A begun model's seed is its settings': the run that gave it another --seed-offset is told so."""
    from posnet_fairseq.compare import run
    from posnet_fairseq.compare.steps import Steps

    steps = Steps(tmp_path / "o")
    recipe_of = lambda seed: recipes.step_settings(recipes.Recipe(seed=seed), recipes.Budget.parse("2u"),  # noqa
                                                   options.plan("cpu", 1))
    steps.begin(f"train/{AA}.seed2", dict(recipe_of(2 + 3), flags=[]))
    flags = {"posnet_transformer_tiny": [], AA: []}
    run.check_settings(steps, recipe_of, flags, 1, {AA: 3})
    with pytest.raises(ValueError, match=r"was made with other settings \(seed\)"):
        run.check_settings(steps, recipe_of, flags, 1, {AA: 4})
    with pytest.raises(ValueError, match=r"was made with other settings \(seed\)"):
        run.check_settings(steps, recipe_of, flags, 1)
