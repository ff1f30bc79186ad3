"""posnet-compare with several seeds (--seeds) and with --budget converge, on micro settings.

One micro run with two architectures and two seeds (module fixture) serves the per-seed and mean ± sd figures,
the Verdict section, the cost measured once per architecture, the plots, a re-run that adds a seed and
trains only that seed, and --delete-checkpoints (a run without checkpoints still reports and adds a seed; one
without data too resumes in place). The converge budget is tested on the fixture's data-bin with the trainer
alone.
"""
import csv
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys

import pytest
import sacrebleu

from posnet_fairseq.compare import plots, records, report, training
from posnet_fairseq.compare import recipe as recipes
from posnet_fairseq.compare.run_clock import RunClock
from posnet_fairseq.compare.steps import Steps
from posnet_fairseq.evaluation import generate_output

from test_compare import CHEAP, REPO, TINY, micro_run, run_compare

ARCHS = ["posnet_transformer_tiny", "rope_transformer_tiny"]
ARGV = ["--archs", ",".join(ARCHS), "--budget", "4u", "--train-pairs", "150", "--valid", "10", "--test", "40",
        "--train-max-len", "10", "--vocab-size", "400", "--interval", "2", "--decode-lengths", "8", "--jobs", "2",
        "--min-bucket-sentences", "8", *CHEAP]
# --concat-test: the joined examples' buckets are scored per seed as the natural ones are
SEEDS_ARGV = [*ARGV, "--concat-test", "2"]


@pytest.fixture(scope="module")
def seeds_run(tmp_path_factory):
    return micro_run(tmp_path_factory.mktemp("seeds") / "run", [*SEEDS_ARGV, "--seeds", "2"])


def _rows(path):
    with open(path, newline="") as f:
        return {row["arch"]: row for row in csv.DictReader(f)}


def test_every_figure_is_mean_and_sd_over_the_seeds_with_each_seeds_value(seeds_run):
    out, stdout, results = seeds_run
    assert results["seeds"] == [1, 2]
    # the test split ends with the joined examples of --concat-test; every natural figure leaves them out
    joined_examples = json.loads((out / "quality.json").read_text())["concatenated"]["examples"]
    refs = (out / "raw" / "test.tgt").read_text().splitlines()[:-joined_examples]
    sources = (out / "raw" / "test.src").read_text().splitlines()[:-joined_examples]
    rows = _rows(out / "results.csv")
    table = {row["arch"]: row for row in results["table"]}
    assert list(rows) == ARCHS
    for arch in ARCHS:
        # seed 1 keeps the architecture's own name (a run made before seeds existed resumes as seed 1)
        models = {1: arch, 2: f"{arch}.seed2"}
        assert Steps(out).load(f"train/{models[2]}").settings["seed"] == 2
        assert Steps(out).load(f"train/{models[1]}").settings["seed"] == 1
        hyps = {s: generate_output.read(out / "gen" / f"{m}.out").ordered("hypotheses", len(refs))
                for s, m in models.items()}
        bleu = {s: sacrebleu.corpus_bleu(h, [refs], force=True).score for s, h in hyps.items()}
        chrf = {s: sacrebleu.corpus_chrf(h, [refs]).score for s, h in hyps.items()}
        row = table[arch]
        for name, values in (("bleu", bleu), ("chrf", chrf)):
            assert [row[f"{name}_seed1"], row[f"{name}_seed2"]] == pytest.approx([values[1], values[2]], abs=1e-9)
            assert row[name] == pytest.approx(statistics.fmean(values.values()))
            assert row[f"{name}_sd"] == pytest.approx(statistics.stdev(values.values()))
            assert float(rows[arch][f"{name}_sd"]) == pytest.approx(row[f"{name}_sd"], rel=1e-5, abs=1e-9)
        # each length bucket and its hypothesis / reference length, per seed and over the seeds
        natural = [b for b in results["buckets"] if not b.get("concatenated")]
        for bucket in natural:
            ids = [i for i, s in enumerate(sources) if bucket["lo"] <= len(s.split()) <= bucket["hi"]]
            key = f"bleu_len_{bucket['lo']}_{bucket['hi']}"
            scores = [sacrebleu.corpus_bleu([hyps[s][i] for i in ids], [[refs[i] for i in ids]], force=True)
                      for s in (1, 2)]
            assert [row[f"{key}_seed1"], row[f"{key}_seed2"]] == pytest.approx([b.score for b in scores], abs=1e-9)
            assert row[key + "_sd"] == pytest.approx(statistics.stdev(b.score for b in scores))
            ratio = f"length_ratio_{bucket['lo']}_{bucket['hi']}"
            assert row[f"{ratio}_seed2"] == pytest.approx(scores[1].sys_len / scores[1].ref_len)
            assert ratio + "_sd" in rows[arch]
        joined = [b for b in results["buckets"] if b.get("concatenated")]
        assert joined and natural
        scored = [f"bleu_len_concat2_{b['lo']}_{b['hi']}" for b in joined if not b.get("too_small")]
        assert scored
        for key in scored:
            assert row[key] == pytest.approx(statistics.fmean([row[f"{key}_seed1"], row[f"{key}_seed2"]]))
            assert key + "_sd" in rows[arch]
        assert "bleu_p" not in row and "bleu_ci" not in row  # one seed's bootstrap: quality.json, per model
    text = (out / "results.md").read_text()
    line = next(line for line in text.splitlines() if line.startswith(f"| `{ARCHS[1]}`"))
    assert f"| {table[ARCHS[1]]['bleu']:.1f} ± {table[ARCHS[1]]['bleu_sd']:.1f} |" in line
    assert "mean ± the standard deviation over the seeds 1, 2" in text and "## Length: hypothesis / reference" in text
    assert "seeds 1, 2 (every model once per seed; data seed 1)" in text
    # where decoding stopped: each seed's model in results.md, mean ± sd in the table's columns
    assert "## Where decoding stopped" in text and f"| `{ARCHS[1]}.seed2` |" in text
    stopped = text.split("## Where decoding stopped")[1].split("\n## ")[0]
    assert [line.split("`")[1] for line in stopped.splitlines() if line.startswith("| `")] == [
        *ARCHS, *(f"{arch}.seed2" for arch in ARCHS)]  # the run's order, not the files'
    bucket = natural[0]
    assert f"stop_early_{bucket['lo']}_{bucket['hi']}_sd" in rows[ARCHS[1]]


def test_the_verdict_names_each_model_in_range_and_beyond(seeds_run):
    out, _, results = seeds_run
    text = (out / "results.md").read_text()
    section = text.split("## Verdict")[1].split("## Plots")[0]
    assert "2 seeds (1, 2)" in section and "ignores seed variance" not in section
    lines = [line for line in section.splitlines() if line.startswith("- `") and ": in range " in line]
    assert len(lines) == 1 and lines[0].startswith(f"- `{ARCHS[1]}`: in range ")
    with open(out / "quality.json") as f:
        saved = json.load(f)
    judged = saved["verdict"][ARCHS[1]]
    # the report's family: its three BLEU verdicts and its kept-against-the-baseline ones
    family = 3 + sum(entry["against"] is not None for per in saved["kept"].values() for entry in per.values())
    assert f"This report makes {family} tests" in section
    for side in ("in range", "beyond", "joined"):  # joined: the --concat-test examples beyond the training lengths
        r = judged[side]
        assert r["seeds"] == 2 and r["low"] <= r["effect"] <= r["high"] and r["family"] == family
        assert r["verdict"] == ("no detectable difference" if r["adjusted_p"] > 0.05
                                else "better" if r["effect"] > 0 else "worse")
        label = "joined test examples (--concat-test)" if side == "joined" else side
        assert (f"{label} {r['verdict']} ({r['effect']:+.2f} BLEU, 95% interval {r['low']:+.2f} to "
                f"{r['high']:+.2f}, adjusted p {r['adjusted_p']:.3f}") in lines[0]


def test_cost_and_analysis_once_per_architecture(seeds_run):
    out, _, results = seeds_run
    with open(out / "cost.json") as f:
        cost = json.load(f)
    assert sorted(cost["parameters"]) == sorted(ARCHS) and cost["settings"]["archs"] == ARCHS
    names = Steps(out).names()
    assert [n for n in names if n.startswith("analysis/")] == [f"analysis/{a}" for a in sorted(ARCHS)]
    assert sorted(n for n in names if n.startswith("translate/")) == sorted(
        f"translate/{m}" for a in ARCHS for m in (a, f"{a}.seed2"))


def test_plots_show_the_spread_over_seeds(seeds_run, tmp_path):
    out, _, results = seeds_run
    table = results["table"]
    ax = plots.bleu_vs_speed(table, 8, ARCHS[0], tmp_path / "s.png", results["seeds"]).axes[0]
    for container, row in zip(ax.containers, table):
        assert container.lines[0].get_ydata()[0] == pytest.approx(row["bleu"])  # the mean, +- one sd
        bar = container.lines[2][0].get_segments()[0]
        assert [y for _, y in bar] == pytest.approx([row["bleu"] - row["bleu_sd"], row["bleu"] + row["bleu_sd"]])
    marks = [sorted(c.get_offsets()[:, 1]) for c in ax.collections if len(c.get_offsets()) == 2]
    assert marks == [pytest.approx(sorted([r["bleu_seed1"], r["bleu_seed2"]])) for r in table]
    ax = plots.bleu_by_length(table, results["buckets"], 10, "words", tmp_path / "b.png", results["seeds"]).axes[0]
    first = f"bleu_len_{results['buckets'][0]['lo']}_{results['buckets'][0]['hi']}"
    assert any(t.get_text() == f"{table[0][first]:.1f}±{table[0][first + '_sd']:.1f}" for t in ax.texts)
    assert "mean±sd over the seeds" in ax.get_title() and "* significant" not in ax.get_title()
    fig = plots.valid_loss(ARCHS, results["curves"], tmp_path / "v.png", results["seed_curves"])
    labels = {line.get_label() for line in fig.axes[1].get_lines()}
    assert labels == {ARCHS[1], f"{ARCHS[1]} seed 2", ARCHS[0]}
    assert len(plots.replot(results, str(tmp_path / "again"), "words")) == 4


def test_a_rerun_that_adds_a_seed_trains_only_that_seed(seeds_run, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(seeds_run[0], out)  # a copied --out resumes in place
    stdout = run_compare([*SEEDS_ARGV, "--out", str(out), "--seeds", "3"])
    started = [line.split("train: starting ")[1].split()[0] for line in stdout.splitlines()
               if "train: starting" in line]
    assert started == [f"{a}.seed3" for a in ARCHS]
    for arch in ARCHS:
        for model in (arch, f"{arch}.seed2"):
            assert f"train: skipped {model}, finished earlier" in stdout and f"translate: skipped {model}," in stdout
    assert "cost: skipped, measured earlier" in stdout and "data: skipped" in stdout
    row = {r["arch"]: r for r in json.loads((out / "results.json").read_text())["table"]}[ARCHS[0]]
    assert {"bleu_seed1", "bleu_seed2", "bleu_seed3"} <= set(row)


def _checkpoint_files(out):
    return sorted(name for _, _, files in os.walk(out / "checkpoints") for name in files if ".pt" in name)


def test_a_run_whose_checkpoints_were_deleted_reports_and_adds_a_seed(seeds_run, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(seeds_run[0], out)
    argv = [*SEEDS_ARGV, "--out", str(out)]
    stdout = run_compare([*argv, "--seeds", "2", "--delete-checkpoints"])
    assert "train: starting" not in stdout and "checkpoints: deleted those of 4 models" in stdout
    models = [m for a in ARCHS for m in (a, f"{a}.seed2")]
    assert _checkpoint_files(out) == sorted([training.AVERAGE + ".deleted"] * 4)
    kept = json.loads((out / "checkpoints" / ARCHS[0] / (training.AVERAGE + ".deleted")).read_text())
    assert kept["positions"] == [1024, 1024] and kept["size"] > 0
    before = {r["arch"]: r for r in seeds_run[2]["table"]}

    def table():
        return {r["arch"]: r for r in json.loads((out / "results.json").read_text())["table"]}
    assert {a: (r["bleu_seed1"], r["bleu_seed2"]) for a, r in table().items()} == \
        {a: (r["bleu_seed1"], r["bleu_seed2"]) for a, r in before.items()}
    # a third seed trains and translates only its own models; the deleted ones are reported from their records
    stdout = run_compare([*argv, "--seeds", "3", "--delete-checkpoints"])
    assert "checkpoints: deleted those of 2 models" in stdout  # the third seed's: the others' were gone
    started = [line.split("train: starting ")[1].split()[0] for line in stdout.splitlines()
               if "train: starting" in line]
    assert started == [f"{a}.seed3" for a in ARCHS]
    assert all(f"translate: skipped {m}," in stdout for m in models) and "cost: skipped" in stdout
    assert all(f"analysis: skipped {a}," in stdout for a in ARCHS)
    after = table()
    assert all(after[a]["bleu_seed1"] == before[a]["bleu_seed1"] and "bleu_seed3" in after[a] for a in ARCHS)
    # a run of some of the models reads their cost from the measurement of all (their checkpoints are gone)
    stdout = run_compare([*argv, "--seeds", "3", "--archs", ARCHS[0]])
    assert "cost: skipped, measured earlier with more models" in stdout and "train: starting" not in stdout
    alone = table()
    assert list(alone) == ARCHS[:1]
    assert alone[ARCHS[0]]["train_tokens_per_s"] == after[ARCHS[0]]["train_tokens_per_s"]
    # translating a deleted model again (another beam) is refused, naming the models and the way out
    done = subprocess.run([sys.executable, "-m", "posnet_fairseq.cli.compare", *argv, "--seeds", "3", "--beam", "2"],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1"),
                          timeout=900)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"translating {ARCHS[0]} again (its settings changed (flags)) needs the checkpoints of {ARCHS[0]}, " \
           "which --delete-checkpoints removed" in done.stderr
    assert not (out / "gen" / f"{ARCHS[0]}.out.tmp").exists()


def test_a_run_kept_without_checkpoints_and_data_resumes_in_place(tmp_path):
    """A run as a repository keeps it, without checkpoints and data: resumed under the same path, the data step
    makes the same data again and nothing else runs."""
    out = tmp_path / "run"
    argv = [*ARGV, "--archs", ARCHS[0], "--budget", "2u", "--out", str(out)]
    run_compare([*argv, "--delete-checkpoints"])
    results = (out / "results.csv").read_text()
    for made in ("data-bin", "raw", "spm_text"):
        shutil.rmtree(out / made)
    stdout = run_compare([*argv, "--delete-checkpoints"])
    assert "data: prepared again: its output data-bin is missing" in stdout
    assert "checkpoints: none left to delete" in stdout
    assert f"train: skipped {ARCHS[0]}" in stdout and f"translate: skipped {ARCHS[0]}," in stdout
    assert "cost: skipped, measured earlier" in stdout and (out / "results.csv").read_text() == results


def test_a_deleted_file_keeps_its_content_for_the_records(tmp_path):
    from posnet_fairseq.compare import steps as steps_module

    steps = Steps(tmp_path / "run")
    path = tmp_path / "run" / "model.pt"
    path.parent.mkdir()
    path.write_bytes(b"weights")
    steps.finish("train/a", {"x": 1}, {}, [str(path)])
    content = steps.content(str(path))
    steps.delete(str(path), positions=[8, 9])
    assert not path.exists() and steps.content(str(path)) == content
    assert steps.why_not_done("train/a", {"x": 1}, {}) is None
    assert steps_module.deleted(str(path)) == dict(content, positions=[8, 9])
    path.write_bytes(b"other weights")  # a file there again is what it is
    assert steps_module.deleted(str(path)) is None
    assert steps.why_not_done("train/a", {"x": 1}, {}) == "its output model.pt is damaged"


def test_converge_stops_on_patience_and_flags_the_cap(seeds_run, tmp_path):
    """A model whose validation loss cannot improve (lr 1e-12: it moves far below the 3 decimals fairseq
    compares) stops after 1 + patience validations and is converged, evaluated on its best checkpoints; a cap
    reached before the patience could run out is "not converged" in results.md."""
    data_bin = str(seeds_run[0] / "data-bin")
    flags = TINY.split()
    outcomes = {}
    for cap, lr in (("20u", 1e-12), ("2u", 2e-3)):
        steps = Steps(tmp_path / cap)
        budget = recipes.Budget.parse(f"converge:{cap}", patience=2)
        recipe = recipes.Recipe(lr=lr, interval=1, average=2)
        trainer = training.Trainer(steps, data_bin, budget, recipe, _cpu_plan(), lambda message: None)
        outcomes[cap] = trainer.run([ARCHS[0]], {ARCHS[0]: flags})[ARCHS[0]]
    stopped, capped = outcomes["20u"], outcomes["2u"]
    assert (stopped.converged, stopped.updates) == (True, 3)
    assert len(stopped.averaged) == 2 and all(name.startswith("checkpoint.best_loss_") for name in stopped.averaged)
    assert (capped.converged, capped.updates) == (False, 2)
    quality = records.Quality.read({"systems": {}, "buckets": [], "failed": {}})
    cost = records.Cost.read({"training_steps": {}, "decoding": {}, "parameters": {}, "decode_lengths": []})
    table = report.rows(["a", "b"], {"a": stopped, "b": capped}, quality, cost, {})
    text = report.markdown(table, quality, cost, {})
    assert "| `a` | 3 |" in text and "| `b` | 2 (not converged) |" in text


def test_a_run_made_before_seeds_resumes_as_its_seed(tmp_path):
    """The previous version recorded train/ARCH with the recipe's seed: with the same --seed it is that seed's
    model (a seed added beside it is ARCH.seedS); another --seed is refused as other settings."""
    from posnet_fairseq.compare import run

    budget, plan = recipes.Budget.parse("5e"), _cpu_plan()

    def recipe_of(seed):
        return recipes.step_settings(dataclasses.replace(recipes.Recipe(), seed=seed), budget, plan)

    steps = Steps(tmp_path)
    steps.begin("train/a", dict(recipe_of(1), flags=[]))
    run.check_settings(steps, recipe_of, {"a": []}, 1)
    steps.begin("train/a.seed2", dict(recipe_of(2), flags=[]))
    run.check_settings(steps, recipe_of, {"a": []}, 1)
    with pytest.raises(ValueError, match=r"other settings \(seed\): .* use a new --out"):
        run.check_settings(steps, recipe_of, {"a": []}, 2)


def _cpu_plan():
    from posnet_fairseq.compare import devices

    return devices.plan("cpu", jobs=1)


@pytest.mark.parametrize("text, cap, patience", [("converge", "40 epochs", 10), ("converge:3000u", "3000 updates", 10),
                                                 ("converge:30m", "30 minutes", 10)])
def test_converge_budget_parses_with_its_defaults(text, cap, patience):
    budget = recipes.Budget.parse(text)
    assert f"{budget.amount:g} {budget.unit}" == cap and budget.patience == patience
    assert str(budget) == f"until the validation loss has not improved for {patience} validations, at most {cap}"
    flags = recipes.Recipe(average=3).fairseq_flags(budget)
    assert flags[flags.index("--patience") + 1] == "10" and flags[flags.index("--keep-best-checkpoints") + 1] == "3"


@pytest.mark.parametrize("text, patience, message", [("converge:", None, "give the cap"),
                                                     ("converge:5x", None, "--budget"),
                                                     ("5e", 3, "--patience 3 goes with --budget converge")])
def test_bad_converge_budget_names_the_flag(text, patience, message):
    with pytest.raises(ValueError, match=message):
        recipes.Budget.parse(text, patience)


def test_the_eta_of_a_converge_run_expects_the_finished_models_length():
    """The cap overstates a model that its patience stops: once models have finished, the ETA expects every
    model still training to train as long as they did on average, counted as ``Budget.used`` counts (epochs
    completed: a model stopped in its 14th epoch after 2,700 updates of 200 a epoch has trained 13.5)."""
    outcome = records.TrainOutcome
    finished = [outcome("a", "a.pt", epochs=14, updates=2700, converged=True),
                outcome("b", "b.pt", epochs=18, updates=3500, converged=True),
                outcome("c", "c.pt", epochs=40, updates=8000, converged=False),  # its cap: as long as it trained
                outcome("d", failed="it crashed", epochs=2, updates=300)]
    assert recipes.Budget.parse("converge:40e").expected(finished, 200) == pytest.approx((13.5 + 17.5 + 40) / 3)
    assert recipes.Budget.parse("converge:8000u").expected(finished, 200) == pytest.approx((2700 + 3500 + 8000) / 3)
    assert recipes.Budget.parse("converge:40e").expected(finished[3:], 200) == 40  # none finished: the cap
    assert recipes.Budget.parse("converge:30m").expected(finished, 200) == 30  # minutes are not recorded
    assert recipes.Budget.parse("20e").expected(finished, 200) == 20  # a fixed budget is every model's length
    used = recipes.Budget.parse("converge:40e").used(14, 100, 200, 2700, 0)  # what the ETA reads of model a
    assert used == 13.5


def test_the_eta_leaves_out_a_pause_of_local_jobs_but_not_of_cluster_jobs():
    """A local run stopped with its children (SIGSTOP of the group, a suspend) trained nothing meanwhile;
    cluster jobs train on while the runner is stopped."""
    now = [1000.0]
    local, cluster = RunClock(True, lambda: now[0]), RunClock(False, lambda: now[0])
    for step in [0.5] * 20 + [26 * 60.0] + [0.5] * 20:  # polls every half second, a 26-minute pause
        now[0] += step
        local.poll()
        cluster.poll()
    assert local.elapsed() == pytest.approx(20.0) and cluster.elapsed() == pytest.approx(20.0 + 26 * 60)
    now[0] += RunClock.STALL - 1  # a slow poll (a model's checkpoints averaged) is no pause
    local.poll()
    assert local.elapsed() == pytest.approx(20.0 + RunClock.STALL - 1)
