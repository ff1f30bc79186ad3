"""posnet-compare end to end on micro settings (tiny dims, a few updates), plus its parts.

One synthetic run (module fixture) serves the table, bucketed-BLEU, plot and
fixed-length tests; the resume test trains on that run's data-bin (``--data``),
and ``--raw`` gets its own small corpus.
"""
import csv
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from posnet_fairseq.cli import compare
from posnet_fairseq import fairseq_log, process_pool
from posnet_fairseq.compare import columns, data, devices, records, report, training
from posnet_fairseq.compare import recipe as recipes
from posnet_fairseq.compare.steps import Steps
from posnet_fairseq.evaluation import bootstrap, generate_output

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ("--encoder-embed-dim 16 --encoder-ffn-embed-dim 32 --encoder-attention-heads 2 --encoder-layers 1 "
        "--decoder-embed-dim 16 --decoder-ffn-embed-dim 32 --decoder-attention-heads 2 --decoder-layers 1")
# The cheapest measurement settings: one round, one timed step, a few sentences.
CHEAP = ["--decode-sentences", "4", "--decode-rounds", "1", "--step-rounds", "1", "--timed-steps", "1",
         "--bootstrap-samples", "50", "--progress-every", "5", "--model-flags", TINY]
# LinearNet with a 16-position table: the longer test buckets and output length 30 are beyond it.
LINEAR = "linearnet_transformer_tiny"
LINEAR_FLAGS = f"{LINEAR}=--linearnet-max-length 16 --max-source-positions 16 --max-target-positions 16"
ARCHS = ["posnet_transformer_tiny", LINEAR]


def run_compare(argv):
    """posnet-compare in a fresh interpreter (as a user runs it); returns its stdout."""
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-m", "posnet_fairseq.cli.compare", *argv], capture_output=True,
                          text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def micro_run(out, argv):
    """posnet-compare ``argv`` into ``out``: (out, its stdout, its results.json)."""
    stdout = run_compare([*argv, "--out", str(out)])
    with open(out / "results.json") as f:
        return out, stdout, json.load(f)


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory):
    return micro_run(tmp_path_factory.mktemp("compare") / "run", [
        "--archs", ",".join(ARCHS), "--arch-flags", LINEAR_FLAGS, "--budget", "4u",
        "--train-pairs", "150", "--valid", "10", "--test", "40", "--train-max-len", "10", "--vocab-size", "400",
        "--interval", "2", "--decode-lengths", "8,30", "--jobs", "2", "--min-bucket-sentences", "8", *CHEAP])


def read_csv(path):
    with open(path, newline="") as f:
        return {row["arch"]: row for row in csv.DictReader(f)}


def test_micro_run_writes_the_table(synthetic_run):
    import sacrebleu

    out, stdout, results = synthetic_run
    text = (out / "results.md").read_text()
    assert stdout.strip().endswith(text.strip())
    table_lines = [line for line in text.split("## Length")[0].splitlines() if line.startswith("| `")]
    assert [line.split("`")[1] for line in table_lines] == ARCHS
    # one seed (the default): the verdict, one line per model against the first, says it ignores seed variance
    verdict = text.split("## Verdict")[1].split("## Plots")[0]
    assert "this verdict ignores seed variance" in verdict
    assert [line.split("`")[1] for line in verdict.splitlines() if line.startswith("- `") and ": in range " in line] \
        == ARCHS[1:]
    rows = read_csv(out / "results.csv")
    assert list(rows) == ARCHS
    base = rows[ARCHS[0]]
    assert float(base["train_speed_ratio"]) == 1.0 and float(base["decode_8_ratio"]) == 1.0
    refs = (out / "raw" / "test.tgt").read_text().splitlines()
    hyps = {arch: generate_output.read(out / "gen" / f"{arch}.out").ordered("hypotheses", len(refs)) for arch in ARCHS}
    for arch in ARCHS:
        row = rows[arch]
        # the scores are sacreBLEU's on the written hypotheses (skipped sentences count as empty)
        assert float(row["bleu"]) == pytest.approx(sacrebleu.corpus_bleu(hyps[arch], [refs], force=True).score,
                                                   abs=1e-4)
        assert float(row["chrf"]) == pytest.approx(sacrebleu.corpus_chrf(hyps[arch], [refs]).score, abs=1e-4)
        assert float(row["train_tokens_per_s"]) > 0 and float(row["step_memory_mib"]) > 0
        assert int(row["updates"]) == 4
    # p: the one paired bootstrap (50 resamples, seed 12345), two-sided: twice the smaller one-sided p-value
    test = bootstrap.paired_bootstrap(sacrebleu.metrics.BLEU(force=True), hyps[LINEAR], hyps[ARCHS[0]], refs, 50)
    assert float(rows[LINEAR]["bleu_p"]) == pytest.approx(min(1, 2 * min(test["p_value"], test["p_value_worse"])),
                                                         abs=1e-6)
    assert "paired bootstrap: 50 resamples, seed 12345" in text and "tok:13a" in text
    # the buckets above 10 words are marked as beyond the training lengths; each shows its sentences
    assert "BLEU 6-10 (n=8) |" in text and "BLEU 11-15 * (n=8) |" in text
    with open(out / "quality.json") as f:
        quality = json.load(f)
    assert [b["beyond_training"] for b in quality["buckets"]] == [False, False, True, True, True]
    assert quality["systems"][LINEAR]["bleu"]["p"] is not None  # paired test against the first arch
    assert "DEBUG" not in stdout and "tensorboardX" not in stdout


def test_cost_columns_give_each_ceiling_from_the_flop_counter(synthetic_run):
    """The ceiling cells are the first arch's FLOPs per token over the arch's as flops.py counts them for the
    models the run measured (the training step's shapes, each trained checkpoint decoding the speed set); the
    share cells are the measured ratio over that ceiling."""
    from fairseq.data import Dictionary, data_utils

    from posnet_fairseq import precompute
    from posnet_fairseq.benchmark import flops, training_step
    from posnet_fairseq.data.length_ratio import length_ratio

    out, _, results = synthetic_run
    with open(out / "cost.json") as f:
        settings = json.load(f)["settings"]
    model_flags = {arch: Steps(out).load(f"train/{arch}").settings["flags"] for arch in ARCHS}
    vocab = len(Dictionary.load(str(out / "data-bin" / "dict.tgt.txt")))
    train = {arch: training_step.measure(arch, settings["step_batch"], settings["step_length"], vocab,
                                         model_flags[arch])["flops_per_token"] for arch in ARCHS}
    speed_bin = out / data.SPEED_DIR
    # the training split is there too, for a model that reads the length ratio when it loads
    assert length_ratio(str(speed_bin), "src", "tgt") == length_ratio(str(out / "data-bin"), "src", "tgt")
    sources = data_utils.load_indexed_dataset(str(speed_bin / "test.src-tgt.src"), None)  # its sizes: memory-mapped
    source_length = round(float(sources.sizes.mean()))  # EOS included

    def decoding(arch, lengths):  # L tokens + EOS
        model = precompute.load_checkpoint_model(str(out / "checkpoints" / arch / "checkpoint_avg.pt"),
                                                 str(speed_bin))[2]
        return flops.decoding_flops(model, source_length, lengths, settings["decode_beam"])

    base = ARCHS[0]
    decode = {base: decoding(base, [9]), LINEAR: decoding(LINEAR, [9])}  # 30 is beyond LinearNet's 16
    table = {row["arch"]: row for row in results["table"]}
    rows = read_csv(out / "results.csv")
    text = (out / "results.md").read_text()
    assert "train ceiling (share)" in text and "decode L=8 ceiling (share)" in text
    for arch in ARCHS:
        row = table[arch]
        ceiling = train[base] / train[arch]
        assert row["train_ceiling"] == pytest.approx(ceiling, rel=1e-9)
        assert row["train_share"] == pytest.approx(row["train_speed_ratio"] / ceiling, rel=1e-9)
        assert float(rows[arch]["train_ceiling"]) == pytest.approx(ceiling, rel=1e-5)
        cells = [c.strip() for c in next(line for line in text.splitlines() if line.startswith(f"| `{arch}`"))
                 .split("|")[1:-1]]
        assert f"{ceiling:.2f}x ({row['train_share']:.0%})" in cells
        ceiling = decode[base][9] / decode[arch][9]
        assert row["decode_8_ceiling"] == pytest.approx(ceiling, rel=1e-9)
        assert row["decode_8_share"] == pytest.approx(row["decode_8_ratio"] / ceiling, rel=1e-9)
        assert float(rows[arch]["decode_8_share"]) == pytest.approx(row["decode_8_ratio"] / ceiling, rel=1e-5)
        assert f"{ceiling:.2f}x ({row['decode_8_share']:.0%})" in cells
    assert table[base]["decode_30_ceiling"] == 1.0 and table[base]["train_ceiling"] == 1.0
    assert "decode_30_ceiling" not in table[LINEAR]  # beyond its positions: no ceiling either
    # LinearNet's arithmetic differs from the Transformer's, so a ceiling of 1 everywhere would fail
    assert table[LINEAR]["train_ceiling"] != pytest.approx(1.0, abs=1e-3)
    assert table[LINEAR]["decode_8_ceiling"] != pytest.approx(1.0, abs=1e-3)


def _hypotheses(path):
    hyps = {}
    for line in open(path, encoding="utf-8"):
        if line.startswith("H-"):
            head, _, text = line.rstrip("\n").split("\t")
            hyps[int(head[2:])] = text
    return hyps


def test_cost_report_has_the_ctranslate2_rows_or_says_why_not(synthetic_run):
    """The first model converted with CTranslate2 and timed like the others (cost.json), fp32 and int8, in
    results.md with its ratio to the first model; without ctranslate2, the line says it is not installed."""
    from posnet_fairseq.benchmark import ctranslate2_decoding

    out, _, _ = synthetic_run
    with open(out / "cost.json") as f:
        converted = json.load(f)["ctranslate2"]
    line = next(line for line in (out / "results.md").read_text().splitlines() if line.startswith("- CTranslate2"))
    if ctranslate2_decoding.missing():
        assert converted == {"missing": ctranslate2_decoding.missing()}
        assert line == f"- CTranslate2: not measured: {ctranslate2_decoding.missing()}."
        return
    assert set(converted) == {"ctranslate2 fp32", "ctranslate2 int8"}
    with open(out / "cost.json") as f:
        base_rate = json.load(f)["decoding"][ARCHS[0]]["8"]["rate"]
    for row, per in converted.items():
        assert per["8"]["tokens_per_hyp"] == 9 and per["30"]["tokens_per_hyp"] == 31
        assert f"{row} L=8: {per['8']['rate']:.1f} sent/s ({per['8']['rate'] / base_rate:.2f})" in line
    assert f"`{ARCHS[0]}` converted in-process" in line


def test_generate_output_reader(tmp_path):
    path = tmp_path / "gen.out"
    path.write_text("S-1\tein hund\nT-1\ta dog\nH-1\t-0.5\ta dog\nD-1\t-0.5\tA dog\nP-1\t-0.1 -0.2\n"
                    "H-1\t-0.9\tthe dog\nS-0\tkatze\nH-0\t-0.3\t\nsome log line\n", encoding="utf-8")
    output = generate_output.read(path)
    assert output.hypotheses == {1: "a dog", 0: ""}  # the first of an n-best list; an empty hypothesis
    assert (output.sources, output.references, output.detokenized) == ({1: "ein hund", 0: "katze"}, {1: "a dog"},
                                                                        {1: "A dog"})
    assert output.ordered("references", 3) == ["", "a dog", ""] and output.missing(3) == [2]


def test_bucketed_bleu_is_sacrebleu_on_the_bucket(synthetic_run):
    import sacrebleu

    out, _, results = synthetic_run
    sources = (out / "raw" / "test.src").read_text().splitlines()
    refs = (out / "raw" / "test.tgt").read_text().splitlines()
    row = results["table"][0]
    hyps = _hypotheses(out / "gen" / f"{row['arch']}.out")
    checked = 0
    for bucket in results["buckets"]:
        ids = [i for i, s in enumerate(sources) if bucket["lo"] <= len(s.split()) <= bucket["hi"]]
        assert len(ids) == bucket["sentences"] == 8  # 40 test sentences in 5 equal buckets
        expected = sacrebleu.corpus_bleu([hyps.get(i, "") for i in ids], [[refs[i] for i in ids]], force=True)
        assert row[f"bleu_len_{bucket['lo']}_{bucket['hi']}"] == pytest.approx(expected.score, abs=1e-9)
        checked += 1
    assert checked == 5


def test_fixed_length_mixer_reports_beyond_its_positions(synthetic_run):
    out, _, results = synthetic_run
    linear = next(row for row in results["table"] if row["arch"] == LINEAR)
    # sources of 16-25 words need more than 16 positions (with EOS), their references too
    assert linear["bleu_len_16_20"] == linear["bleu_len_21_25"] == "beyond its 16 positions"
    assert isinstance(linear["bleu_len_1_5"], float)
    assert linear["decode_30_sentences_per_s"] == "beyond its 16 positions"
    assert isinstance(linear["decode_8_sentences_per_s"], float)
    assert "beyond its 16 positions" in (out / "results.md").read_text()


def _png_shape(path):
    import matplotlib.image

    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    return matplotlib.image.imread(path).shape


def test_plots_are_pngs(synthetic_run):
    out, _, results = synthetic_run
    for name in ("bleu_vs_speed", "bleu_by_length", "valid_loss", "position_mixing"):
        height, width, _ = _png_shape(out / "plots" / f"{name}.png")
        assert height > 200 and width > 300

    # what they hold: tests/test_compare_plots.py, drawn from a run's saved results.json
    assert results["curves"][ARCHS[0]][-1][0] == 4  # validated up to the end of the budget
    analysis = out / "analysis" / ARCHS[0]
    assert (analysis / "encoder_position_gram.png").exists()
    assert "Toeplitz R^2" in (analysis / "analyze.txt").read_text()


def _finished(out, name):
    record = Steps(out).load(name)
    return record is not None and record.outputs is not None


def test_interrupted_run_resumes_without_redoing_finished_work(synthetic_run, tmp_path):
    """SIGTERM during training, the re-run resumes; a model added to the finished run is the only one trained."""
    data_bin = synthetic_run[0] / "data-bin"
    out = tmp_path / "run"
    archs = ["posnet_transformer_tiny", "aan_plus_avg_tiny"]
    argv = ["--archs", ",".join(archs), "--data", str(data_bin), "--post-process", "sentencepiece",
            "--out", str(out), "--budget", "20u", "--interval", "2", "--jobs", "1", "--decode-lengths", "8", *CHEAP]
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1")
    first = subprocess.Popen([sys.executable, "-m", "posnet_fairseq.cli.compare", *argv], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    last_b = out / "checkpoints" / archs[1] / "checkpoint_last.pt"
    deadline = time.time() + 600
    while not (_finished(out, f"train/{archs[0]}") and last_b.exists()):
        assert first.poll() is None, first.stdout.read()[-3000:]
        assert time.time() < deadline
        time.sleep(0.05)
    first.send_signal(signal.SIGTERM)
    log = first.communicate(timeout=120)[0]
    assert first.returncode != 0 and f"stopped {archs[1]}; a re-run resumes it" in log
    assert not _finished(out, f"train/{archs[1]}")
    finished = {p: p.stat().st_mtime_ns for p in (out / "checkpoints" / archs[0]).iterdir()}

    stdout = run_compare([*argv, "--progress-every", "0"])
    assert f"train: skipped {archs[0]}, finished earlier" in stdout
    assert f"train: resuming {archs[1]} from {last_b}" in stdout
    # the ETA counts this run's work only: right after the resume (fairseq-train still starting) there is none
    # yet, where counting the resumed model's earlier updates and the finished model would give a figure
    assert re.search(r"progress: model 1/2 finished; running: \S+ epoch \d+ update \d+; ETA -", stdout), stdout
    assert {p: p.stat().st_mtime_ns for p in (out / "checkpoints" / archs[0]).iterdir()} == finished
    assert Steps(out).result(f"train/{archs[1]}")["updates"] == 20  # resumed, not restarted nor past the budget
    assert (out / "checkpoints" / f"{archs[1]}.train.log").read_text().count(fairseq_log.START_MARK) == 2
    assert list(read_csv(out / "results.csv")) == archs

    # A model added to the finished run is the only one trained and translated; the cost is measured again
    # (the set of models changed), and a run after that redoes nothing but the report.
    outputs = {p: p.stat().st_mtime_ns for p in (out / "gen").glob("*.out")}
    added = [*archs, "rope_transformer_tiny"]
    argv[1] = ",".join(added)
    stdout = run_compare(argv)
    for arch in archs:
        assert f"train: skipped {arch}" in stdout and f"translate: skipped {arch}" in stdout
    assert "train: starting rope_transformer_tiny" in stdout and "cost: measured" in stdout
    assert {p: p.stat().st_mtime_ns for p in (out / "gen").glob("*.out") if p.stem in archs} == outputs
    assert list(read_csv(out / "results.csv")) == added
    measured = (out / "cost.json").read_text()
    stdout = run_compare(argv)
    for arch in added:
        assert f"train: skipped {arch}" in stdout and f"translate: skipped {arch}" in stdout
        assert f"analysis: skipped {arch}" in stdout
    assert "cost: skipped, measured earlier" in stdout and (out / "cost.json").read_text() == measured
    # a changed recipe or a trained model's flags are refused, naming what changed
    done = subprocess.run([sys.executable, "-m", "posnet_fairseq.cli.compare", *argv, "--lr", "0.001",
                           "--arch-flags", f"{archs[0]}=--dropout 0.3"], env=env, capture_output=True, text=True)
    assert done.returncode == 2 and f"other settings (flags of {archs[0]}, lr)" in done.stderr


def test_raw_user_corpus_with_its_own_test_set(tmp_path):
    import sacrebleu

    from posnet_fairseq.data.synth import generate_pairs

    # A user's corpus: plain text, one sentence per line, and an official test set of their own.
    pairs = generate_pairs(400, seed=9, max_len=24)
    (tmp_path / "corpus.en").write_text("".join(s + "\n" for s, _ in pairs))
    (tmp_path / "corpus.xx").write_text("".join(t + "\n" for _, t in pairs))
    own = generate_pairs(30, seed=10, max_len=24)
    # a word only the test set has: SentencePiece must not learn it (it learns on the training split only)
    (tmp_path / "test.en").write_text("".join(f"{s} zyxwvutsrq\n" for s, _ in own))
    (tmp_path / "test.xx").write_text("".join(f"{t} zyxwvutsrq\n" for _, t in own))
    out = tmp_path / "run"
    stdout = run_compare(["--archs", "posnet_transformer_tiny", "--raw", str(tmp_path / "corpus.en"),
                          str(tmp_path / "corpus.xx"), "--raw-test", str(tmp_path / "test.en"),
                          str(tmp_path / "test.xx"), "--train-max-len", "12", "--valid", "20",
                          "--vocab-size", "1000", "--out", str(out), "--budget", "2u", "--interval", "1",
                          "--decode-lengths", "8", "--min-bucket-sentences", "10", *CHEAP])
    assert (out / "raw" / "test.en").exists() is False and (out / "raw" / "test.src").read_text() == \
        (tmp_path / "test.en").read_text()
    valid = (out / "raw" / "valid.src").read_text().splitlines()
    train = (out / "raw" / "train.src").read_text().splitlines()
    assert len(valid) == 20 and len(train) == 380 and sorted(valid + train) == sorted(s for s, _ in pairs)
    vocab = {line.split("\t")[0] for line in (out / "spm.vocab").read_text().splitlines()}
    assert "\u2581zyxwvutsrq" not in vocab and "\u2581dog" in vocab
    text = (out / "results.md").read_text()
    # the report names the user's files portably (compare/paths.py): by name, outside the run
    assert "test: 30 pairs of test.en (outside the run) / test.xx (outside the run) (given)" in text
    assert "valid: 20 pairs drawn at random (seed 1) from corpus.en (outside the run)" in text
    assert "--raw-test 'test.en (outside the run)' 'test.xx (outside the run)'" in text and "--out . " in text
    assert str(tmp_path) not in text
    assert "SentencePiece" in text and "learned on the training split only" in text

    rows = read_csv(out / "results.csv")
    assert list(rows) == ["posnet_transformer_tiny"]
    refs = (tmp_path / "test.xx").read_text().splitlines()
    hyps = generate_output.read(out / "gen" / "posnet_transformer_tiny.out").ordered("hypotheses", len(refs))
    assert float(rows["posnet_transformer_tiny"]["chrf"]) == pytest.approx(
        sacrebleu.corpus_chrf(hyps, [refs]).score, abs=1e-4)
    # training pairs longer than 12 pieces were dropped; the test set keeps its long sentences
    train = [len(line.split()) for lang in ("src", "tgt") for line in (out / "spm_text" / f"train.{lang}").open()]
    assert max(train) <= 12
    with open(out / "quality.json") as f:
        buckets = json.load(f)["buckets"]
    assert buckets[0]["lo"] == 1 and any(b["beyond_training"] for b in buckets)
    assert sum(b["sentences"] for b in buckets) == 30
    # every bucket holds 10 sentences or is marked too small (and then has no score)
    for b in buckets:
        assert b["sentences"] >= 10 or (b["too_small"] and not b["scores"])
        cell = rows["posnet_transformer_tiny"][f"bleu_len_{b['lo']}_{b['hi']}"]
        assert (cell == f"too few sentences ({b['sentences']})") == b["too_small"]
        assert f"BLEU {b['lo']}-{b['hi']}{' *' if b['beyond_training'] else ''} (n={b['sentences']})" in text
    assert "pieces" in stdout


def test_raw_files_are_known_by_content_not_by_path(tmp_path, monkeypatch):
    """The same relative --raw paths with other contents (a re-run from another directory) are refused as other
    data; the same files by their absolute paths are the data prepared earlier; a copied --out uses its own."""
    import shutil

    from posnet_fairseq.data.synth import generate_pairs

    for name, seed in (("first", 1), ("second", 2)):
        (tmp_path / name).mkdir()
        pairs = generate_pairs(120, seed=seed, max_len=10)
        (tmp_path / name / "c.en").write_text("".join(s + "\n" for s, _ in pairs))
        (tmp_path / name / "c.xx").write_text("".join(t + "\n" for _, t in pairs))
    said = []

    def prepare(out, raw):
        return data.prepare(Steps(out), "raw", said.append, raw=raw, valid=10, test=10, vocab_size=200, seed=1)

    out = tmp_path / "run"
    monkeypatch.chdir(tmp_path / "first")
    info = prepare(out, ["c.en", "c.xx"])
    monkeypatch.chdir(tmp_path / "second")
    with pytest.raises(ValueError, match="holds a run on other data .input changed: raw source, raw target"):
        prepare(out, ["c.en", "c.xx"])
    said.clear()
    assert prepare(out, [str(tmp_path / "first" / n) for n in ("c.en", "c.xx")]) == info
    assert said == ["data: skipped, prepared earlier (steps/data.json)"]
    shutil.copytree(out, tmp_path / "copy")
    copied = prepare(tmp_path / "copy", [str(tmp_path / "first" / n) for n in ("c.en", "c.xx")])
    assert copied.data_bin == str(tmp_path / "copy" / "data-bin")
    assert copied.references == str(tmp_path / "copy" / "raw" / "test.tgt")
    assert said[-1] == "data: skipped, prepared earlier (steps/data.json)"


def test_merge_small_buckets():
    lengths = [3] * 50 + [8] * 3 + [12] * 40 + [18] * 2
    # 6-10 joins 1-5; 16-20 joins 11-15: never across the training limit (10)
    assert data.merge_small_buckets([(1, 5), (6, 10), (11, 15), (16, 20)], lengths, 10, 10) == [
        (1, 10, False), (11, 20, False)]
    # a small first bucket joins the next; a lone small bucket beyond training is marked, not merged
    assert data.merge_small_buckets([(1, 5), (6, 10), (11, 20)], [3] * 2 + [8] * 30 + [12] * 4, 10, 10) == [
        (1, 10, False), (11, 20, True)]
    assert data.merge_small_buckets([(1, 5), (6, 10)], lengths, 1, 10) == [(1, 5, False), (6, 10, False)]


def test_too_small_bucket_in_table():
    buckets = [{"lo": 1, "hi": 10, "sentences": 50, "beyond_training": False, "too_small": False,
                "scores": {"a": {"score": 30.0, "ci": 1.0}}},
               {"lo": 11, "hi": 20, "sentences": 3, "beyond_training": True, "too_small": True, "scores": {}}]
    quality = {"buckets": buckets, "systems": {}, "failed": {}}
    table = report.rows(["a"], {"a": records.TrainOutcome("a", "c.pt", updates=1)}, records.Quality.read(quality),
                        records.Cost.read({"training_steps": {}, "decoding": {}, "parameters": {}}), {})
    assert table[0]["bleu_len_1_10"] == 30.0 and table[0]["bleu_len_11_20"] == "too few sentences (3)"


def test_bleu_kept_beyond_the_training_lengths():
    """BLEU on a bucket beyond the training lengths as a share of the longest scored bucket within them (a small
    bucket within is passed over), per model; a model with no in-range BLEU keeps no share."""
    def bucket(lo, hi, beyond, scores, too_small=False):
        return {"lo": lo, "hi": hi, "sentences": 3 if too_small else 50, "beyond_training": beyond,
                "too_small": too_small, "scores": {m: {"score": v} for m, v in scores.items()}}

    buckets = [bucket(1, 10, False, {"a": 40.0, "b": 0.0}), bucket(11, 20, False, {}, too_small=True),
               bucket(21, 30, True, {"a": 10.0, "b": 5.0}), bucket(31, 40, True, {"a": 30.0, "b": 1.0})]
    quality = records.Quality.read({"buckets": buckets, "systems": {}, "failed": {}})
    table = report.rows(["a", "b"], {m: records.TrainOutcome(m, "c.pt", updates=1) for m in "ab"}, quality,
                        records.Cost.read({"training_steps": {}, "decoding": {}, "parameters": {}}), {})
    assert (table[0]["bleu_kept_21_30"], table[0]["bleu_kept_31_40"]) == (25.0, 75.0)
    assert not any(key.startswith("bleu_kept") for key in table[1])
    view = columns.View("a", [None], dataclasses.replace(quality, length_unit="words"), None, False)
    text = "\n".join(report._kept(view, table))
    assert "in % of the model's own BLEU on 1-10 words" in text
    assert "| `a` | 25% | 75% |" in text and "| `b` | - | - |" in text


def test_raw_input_errors_name_file_and_line(tmp_path, capsys):
    src, tgt = tmp_path / "c.de", tmp_path / "c.en"
    src.write_bytes(b"eins\nzwei\ndrei \xe4 vier\n" + b"mehr\n" * 20)
    tgt.write_bytes(b"one\ntwo\nthree four\n" + b"more\n" * 20)
    with pytest.raises(SystemExit) as exc:
        compare.main(["--archs", "posnet_transformer_tiny", "--raw", str(src), str(tgt), "--valid", "2", "--test",
                      "2", "--out", str(tmp_path / "out")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"--raw: {src} line 3 is not UTF-8 (byte b'\\xe4' at character 6)" in err


def test_device_plan_with_faked_gpus(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "Fake GPU")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    gpu = devices.plan()
    assert (gpu.device, gpu.jobs, gpu.fp16, gpu.name) == ("cuda", 2, True, "Fake GPU")
    assert [slot["CUDA_VISIBLE_DEVICES"] for slot in gpu.slots] == ["0", "1"]  # one model per GPU
    assert devices.plan(jobs=1).jobs == 1 and not devices.plan(fp16=False).train_flags()
    with pytest.raises(ValueError, match="--jobs 3: one model per GPU"):
        devices.plan(jobs=3)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")
    assert [slot["CUDA_VISIBLE_DEVICES"] for slot in devices.plan().slots] == ["5", "7"]
    cpu = devices.plan("cpu", jobs=3)
    assert (cpu.device, cpu.jobs, cpu.train_flags()) == ("cpu", 3, [])
    assert all(slot["OMP_NUM_THREADS"] == "1" for slot in cpu.slots)
    # the same recipe, so the same tokens per update: only --fp16 is added on the GPU
    recipe, budget = recipes.Recipe(), recipes.Budget.parse("5e")
    on_gpu = recipes.train_command("bin", "save", "a", [], recipe, budget, gpu.train_flags())
    on_cpu = recipes.train_command("bin", "save", "a", [], recipe, budget, cpu.train_flags())
    assert [a for a in on_gpu if a not in on_cpu] == ["--fp16"] and len(on_gpu) == len(on_cpu) + 1
    assert "GPU (Fake GPU)" in gpu.describe() and "fp16" in gpu.describe() and "CPU" in cpu.describe()


def test_trainer_runs_one_model_per_gpu_at_a_time(monkeypatch, tmp_path):
    """Three models on two (faked) GPUs: at most two processes at once, never two on one GPU."""
    started, running, most = [], set(), [0]

    class FakeProcess:
        def __init__(self, command, stdout, stderr, env):
            self.gpu, self.polls, self.pid, self.returncode = env["CUDA_VISIBLE_DEVICES"], 0, os.getpid(), None
            assert self.gpu not in running
            running.add(self.gpu)
            most[0] = max(most[0], len(running))
            started.append((command[command.index("--arch") + 1], self.gpu, "--fp16" in command))

        def poll(self):
            self.polls += 1
            if self.polls > 2 and self.returncode is None:
                self.returncode = 0
                running.discard(self.gpu)
            return self.returncode

    monkeypatch.setattr(training.subprocess, "Popen", FakeProcess)
    monkeypatch.setattr(process_pool.time, "sleep", lambda s: None)
    monkeypatch.setattr(training.Trainer, "_finish", lambda self, arch: records.TrainOutcome(arch))
    plan = devices.Plan("cuda", ({"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}), fp16=True)
    trainer = training.Trainer(Steps(tmp_path), "bin", recipes.Budget.parse("1u"), recipes.Recipe(), plan,
                               lambda message: None)
    outcomes = trainer.run(["a", "b", "c"], {"a": [], "b": [], "c": []})
    assert sorted(outcomes) == ["a", "b", "c"] and most[0] == 2
    assert [s[0] for s in started] == ["a", "b", "c"] and {s[1] for s in started[:2]} == {"0", "1"}
    assert all(s[2] for s in started)


@pytest.mark.parametrize("text, amount, unit", [("5e", 5, "epochs"), ("2000u", 2000, "updates"),
                                                ("1.5m", 1.5, "minutes"), (" 3 epochs", 3, "epochs")])
def test_budget_parses(text, amount, unit):
    budget = recipes.Budget.parse(text)
    assert (budget.amount, budget.unit) == (amount, unit)


@pytest.mark.parametrize("text", ["5", "0e", "2.5u", "10 hours", ""])
def test_bad_budget_names_the_flag(text):
    with pytest.raises(ValueError, match="--budget"):
        recipes.Budget.parse(text)


@pytest.mark.parametrize("argv, flag", [
    (["--archs", "no_such_arch"], "--archs"),
    (["--archs", "posnet_transformer_tiny,rposnet_transfomer_tiny"],
     "--archs: unknown architecture rposnet_transfomer_tiny; did you mean rposnet_transformer_tiny"),
    (["--archs", "posnet_transformer_tiny", "--raw-test", "a", "b"], "--raw-test gives your own test files for --raw"),
    (["--archs", "posnet_transformer_tiny", "--budget", "3 hours"], "--budget"),
    (["--archs", "posnet_transformer_tiny", "--data", "/x"], "--post-process"),
    (["--archs", "posnet_transformer_tiny", "--arch-flags", "other=--dropout 0"], "--arch-flags"),
    (["--archs", "posnet_transformer_tiny", "--train-max-len", "20", "--test-max-len", "20"], "--test-max-len"),
    (["--archs", "posnet_transformer_tiny", "--raw", "/no/src", "/no/tgt"], "--raw"),
    (["--archs", "posnet_transformer_tiny", "--seeds", "0"], "--seeds 0: at least one seed"),
    (["--archs", "posnet_transformer_tiny", "--seeds", "1,1"], "--seeds '1,1': a list of distinct seeds"),
    (["--archs", "posnet_transformer_tiny", "--patience", "3"], "--patience 3 goes with --budget converge"),
    (["--archs", "posnet_transformer_tiny", "--budget", "converge:40e", "--patience", "0"], "--patience 0"),
])
def test_bad_flags_are_named(argv, flag, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        compare.main([*argv, "--out", str(tmp_path / "out")])
    assert exc.value.code == 2
    assert flag in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_valid_curve_leaves_out_the_interruption(tmp_path):
    log = tmp_path / "a.train.log"
    log.write_text(
        f"{fairseq_log.START_MARK}100.0\n"
        "2026-01-01 10:00:00 | INFO | fairseq.trainer | begin training epoch 1\n"
        "2026-01-01 10:00:30 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 5.5 | nll_loss 5 | "
        "num_updates 50\n"
        "2026-01-01 10:00:40 | INFO | train_inner | epoch 001:     60 / 100 loss=5, num_updates=60\n"
        f"{fairseq_log.START_MARK}200.0\n"
        "2026-01-01 11:00:00 | INFO | fairseq.trainer | begin training epoch 1\n"
        "2026-01-01 11:00:20 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 4.25 | nll_loss 4 | "
        "num_updates 100 | best_loss 4.25\n")
    # 40 s in the first process (until its last line), then 20 s in the second
    assert fairseq_log.valid_curve(log) == [(50, 30.0, 5.5), (100, 60.0, 4.25)]


def _wait_for(condition, process, what):
    deadline = time.time() + 600
    while not condition():
        assert process.poll() is None, f"ended before {what}: " + process.stdout.read()[-3000:]
        assert time.time() < deadline, f"no {what} in 600 s"
        time.sleep(0.02)


def _log_has(out, text):
    return lambda: (out / "compare.log").exists() and text in (out / "compare.log").read_text()


def test_kill_9_in_each_step_then_the_same_command_finishes(synthetic_run, tmp_path):
    """kill -9 of a child training, then of the whole run during training (its checkpoint_last.pt deleted
    too), translation and cost: each re-run redoes only what was not finished, from a directory holding a
    stray posnet_fairseq package (the children import the installed plugin); a damaged checkpoint_avg.pt
    is made again; a moved --out is found again."""
    arch = "posnet_transformer_tiny"
    out = tmp_path / "run"
    argv = ["--archs", arch, "--data", str(synthetic_run[0] / "data-bin"), "--post-process", "sentencepiece",
            "--out", str(out), "--budget", "16u", "--interval", "2", "--jobs", "1", "--decode-lengths", "8", *CHEAP]
    stray = tmp_path / "elsewhere" / "posnet_fairseq"
    stray.mkdir(parents=True)
    (stray / "__init__.py").write_text("raise ImportError('the stray copy was imported')\n")
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1")

    def start(args=argv):  # its own process group, so that kill -9 takes the run with its children
        return subprocess.Popen([sys.executable, "-P", "-m", "posnet_fairseq.cli.compare", *args], env=env,
                                cwd=stray.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)

    def kill_run(process):
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    save_dir = out / "checkpoints" / arch
    last = save_dir / "checkpoint_last.pt"
    # 1. the child training is killed: the run says that re-running resumes it
    run = start()
    _wait_for(last.exists, run, "checkpoint_last.pt")
    os.kill(int((save_dir / "train.pid").read_text()), signal.SIGKILL)
    stdout = run.communicate(timeout=300)[0]
    assert run.returncode == 1, stdout[-3000:]
    assert "fairseq-train was killed (signal 9); re-running the same command resumes it" in stdout

    # 2. its checkpoint_last.pt is deleted: the re-run says it starts from update 0, with a new log and curve;
    # the whole run is killed while training
    last.unlink()
    run = start()
    _wait_for(_log_has(out, "trains again from update 0"), run, "the restart message")
    assert (out / "checkpoints" / f"{arch}.train.log.discarded").exists()
    _wait_for(last.exists, run, "checkpoint_last.pt")
    kill_run(run)
    # 3. killed while translating, then 4. while measuring the cost
    for message in (f"translate: {arch}", "cost: parameters"):
        run = start()
        _wait_for(_log_has(out, message), run, message)
        kill_run(run)
        (out / "compare.log").write_text("")
    stdout = run_compare(argv)
    assert f"train: skipped {arch}" in stdout and f"translate: skipped {arch}" in stdout
    assert "cost: measured (not finished)" in stdout
    curve = json.loads((out / "results.json").read_text())["curves"][arch]
    # one clean curve from the restart (a validation between the last save and the kill may come twice)
    updates = [point[0] for point in curve]
    assert updates == sorted(updates) and set(updates) == set(range(2, 17, 2))
    assert int(read_csv(out / "results.csv")[arch]["updates"]) == 16

    # a damaged average is made again from the checkpoints, not trained again
    average = save_dir / training.AVERAGE
    intact = average.read_bytes()
    average.write_bytes(intact[: len(intact) // 2])
    stdout = run_compare(argv)
    assert f"its output checkpoints/{arch}/{training.AVERAGE} is damaged" in stdout
    assert "averaging its checkpoints" in stdout and "train: resuming" not in stdout
    assert average.stat().st_size == len(intact)

    # a moved --out finds its own files: nothing is redone
    moved = tmp_path / "moved"
    out.rename(moved)
    argv[argv.index(str(out))] = str(moved)
    stdout = run_compare(argv)
    for step in ("data: skipped", f"train: skipped {arch}", f"translate: skipped {arch}", "cost: skipped"):
        assert step in stdout
    assert str(out) + os.sep not in (moved / "results.md").read_text()


def test_steps_know_their_files_by_content(tmp_path):
    """A step is done while its settings, the content of its inputs and its outputs are the same, whatever
    the inputs' paths; a copied --out is done too."""
    out = tmp_path / "out"
    steps = Steps(out)
    (tmp_path / "a.txt").write_text("one")
    (tmp_path / "b.txt").write_text("one")
    (out / "result").mkdir(parents=True)
    (out / "result" / "x").write_text("made")
    steps.finish("s", {"n": 1}, {"text": tmp_path / "a.txt"}, [out / "result"], {"found": 2})
    assert steps.why_not_done("s", {"n": 1}, {"text": tmp_path / "b.txt"}) is None  # same content elsewhere
    assert steps.result("s") == {"found": 2}
    assert "settings changed (n)" in steps.why_not_done("s", {"n": 2}, {"text": tmp_path / "a.txt"})
    (tmp_path / "a.txt").write_text("two")  # the same path, other contents
    assert steps.why_not_done("s", {"n": 1}, {"text": tmp_path / "a.txt"}) == "its input changed: text"
    import shutil

    shutil.copytree(out, tmp_path / "copy")
    (out / "result" / "x").write_text("damaged")
    assert steps.why_not_done("s", {"n": 1}, {"text": tmp_path / "b.txt"}) == "its output result is damaged"
    assert Steps(tmp_path / "copy").why_not_done("s", {"n": 1}, {"text": tmp_path / "b.txt"}) is None
    steps.begin("t", {"flags": ["--x"]})
    assert steps.why_not_done("t", {"flags": ["--x"]}, {}) == "not finished"
    assert steps.changed("t", {"flags": ["--y"]}) == ["flags"] and steps.names() == ["s", "t"]


def test_a_step_made_with_more_inputs_differs_only_in_the_inputs_both_have(tmp_path):
    """``recorded_more``: the cost step measured with more models' checkpoints than a later run compares."""
    steps = Steps(tmp_path / "out")
    for name, text in (("a", "one"), ("b", "two"), ("c", "three")):
        (tmp_path / name).write_text(text)
    steps.finish("s", {}, {"first": tmp_path / "a", "second": tmp_path / "b"}, [])
    record = steps.load("s")
    assert steps.changed_inputs(record, {"first": tmp_path / "a"}) == ["second"]
    assert steps.changed_inputs(record, {"first": tmp_path / "a"}, recorded_more=True) == []
    assert steps.changed_inputs(record, {"first": tmp_path / "c"}, recorded_more=True) == ["first"]
    assert steps.changed_inputs(record, {"third": tmp_path / "a"}, recorded_more=True) == ["third"]


def test_a_step_made_for_more_members_serves_a_run_of_some_of_them(tmp_path):
    """The cost step of models a, b, c serves a run of a and c (the same baseline first, the same measuring
    settings, each one's own flags and checkpoint the same, its output intact), and nothing else."""
    steps = Steps(tmp_path / "out")
    for name in ("a", "b", "c", "cost.json"):
        (tmp_path / name).write_text(name)
    inputs = {f"checkpoint of {m}": tmp_path / m for m in "abc"}
    steps.finish("cost", {"archs": ["a", "b", "c"], "rounds": 2, "generate_flags": {"c": ["--x"]}}, inputs,
                 [tmp_path / "cost.json"])

    def serves(archs, rounds=2, flags=None, checkpoints=None):
        settings = {"archs": archs, "rounds": rounds, "generate_flags": flags or {"c": ["--x"]}}
        mine = {f"checkpoint of {m}": (checkpoints or {}).get(m, tmp_path / m) for m in archs}
        return steps.done_for_more("cost", settings, mine, "archs", per_member=("generate_flags",))
    assert serves(["a", "c"]) and serves(["a", "b", "c"])
    assert not serves(["c", "a"])  # another baseline
    assert not serves(["a", "c"], rounds=3)  # measured otherwise
    assert not serves(["a", "c"], flags={"c": ["--y"]})  # c translates with other flags
    assert not serves(["a", "d"])  # d was not measured
    assert not serves(["a", "c"], checkpoints={"c": tmp_path / "b"})  # c's checkpoint is another
    (tmp_path / "cost.json").write_text("damaged")
    assert not serves(["a", "c"])


@pytest.mark.parametrize("signum,status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_compare_says_it_resumes_and_exits_with_the_signals_status(tmp_path, capsys, monkeypatch,
                                                                                   ctrl_c, signum, status):
    """Issue 27: SIGINT / SIGTERM ended posnet-compare with a KeyboardInterrupt traceback and exit status 1."""
    from posnet_fairseq.compare import run as compare_run

    def interrupted(*args):
        os.kill(os.getpid(), signum)
        time.sleep(5)  # the signal arrives first
    monkeypatch.setattr(compare_run, "run", interrupted)
    with pytest.raises(SystemExit) as exit_:
        compare.main(["--archs", "posnet_transformer_tiny", "--out", str(tmp_path / "run")])
    assert exit_.value.code == status
    assert capsys.readouterr().err == "posnet-compare: interrupted; the same command resumes\n"


def test_every_bad_model_flag_is_named_before_any_data(tmp_path, capsys):
    """Each model's flags go through the plugin's own checks (its model built on a tiny dictionary) before the
    data is prepared: every bad flag at once, with its architecture, exit 2, nothing written."""
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        compare.main(["--archs", "posnet_transformer_tiny,rope_transformer_tiny,aan_plus_avg_tiny",
                      "--arch-flags", "posnet_transformer_tiny=--encoder-self-mixer foo",
                      "--arch-flags", "rope_transformer_tiny=--no-such-flag 3", "--out", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "posnet_transformer_tiny: --encoder-self-mixer foo: unknown mixer" in err
    assert "rope_transformer_tiny: unrecognized arguments: --no-such-flag 3" in err
    assert "aan_plus_avg_tiny" not in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("make, fix", [("file", "is a file"), ("under_file", "is a file"),
                                       ("unwritable", "cannot be written")])
def test_out_that_is_not_a_writable_directory_is_one_line(make, fix, tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    out = {"file": tmp_path / "f", "under_file": tmp_path / "f" / "run",
           "unwritable": "/proc/posnet-compare-out"}[make]  # /proc: not writable even for root
    with pytest.raises(SystemExit) as exc:
        compare.main(["--archs", "posnet_transformer_tiny", "--out", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]  # argparse's usage, then the error on one line
    assert last.startswith(f"posnet-compare: error: --out {out}") and fix in last and "Traceback" not in err


def _failing_training(monkeypatch, failing):
    """fairseq-train commands of the ``failing`` architectures exit 1 with a plugin-like error."""
    real = recipes.train_command

    def command(data_bin, save_dir, arch, *rest):
        if arch in failing:
            return [sys.executable, "-c", "import sys; print('ValueError: broken on purpose'); sys.exit(1)"]
        return real(data_bin, save_dir, arch, *rest)

    monkeypatch.setattr(training, "train_command", command)


SMALL_SYNTHETIC = ["--budget", "2u", "--train-pairs", "60", "--valid", "6", "--test", "12", "--train-max-len", "10",
                   "--vocab-size", "200", "--interval", "1", "--decode-lengths", "8", "--jobs", "2",
                   "--min-bucket-sentences", "2", *CHEAP]


def test_a_failed_baseline_is_said_and_nothing_is_compared_to_another_model(tmp_path, monkeypatch, capsys):
    archs = ["posnet_transformer_tiny", "rope_transformer_tiny"]
    _failing_training(monkeypatch, {archs[0]})
    out = tmp_path / "run"
    status = compare.main(["--archs", ",".join(archs), "--out", str(out), *SMALL_SYNTHETIC])
    assert status == 1
    text = (out / "results.md").read_text()
    assert f"baseline `{archs[0]}` FAILED" in text and "broken on purpose" in text
    assert "no BLEU, ratio or p-value" in text
    rows = read_csv(out / "results.csv")
    assert list(rows) == archs and "broken on purpose" in rows[archs[0]]["failed"]
    assert not rows[archs[1]].get("bleu_p") and not rows[archs[1]].get("train_speed_ratio")
    # a failed training locks nothing: the same --out takes other flags for it
    assert Steps(out).names("train/") == [f"train/{archs[1]}"]


def test_a_baseline_failed_in_another_seed_is_the_one_named(tmp_path, monkeypatch):
    """With --seeds, the baseline's seed-1 model may train and its seed-2 model fail: results.md names that one."""
    archs = ["posnet_transformer_tiny", "rope_transformer_tiny"]
    real = recipes.train_command

    def command(data_bin, save_dir, arch, flags, recipe, *rest):
        if arch == archs[0] and recipe.seed == 2:
            return [sys.executable, "-c", "import sys; print('ValueError: broken on purpose'); sys.exit(1)"]
        return real(data_bin, save_dir, arch, flags, recipe, *rest)

    monkeypatch.setattr(training, "train_command", command)
    out = tmp_path / "run"
    assert compare.main(["--archs", ",".join(archs), "--out", str(out), "--seeds", "2", *SMALL_SYNTHETIC]) == 1
    text = (out / "results.md").read_text()
    assert f"baseline `{archs[0]}.seed2` FAILED" in text and "FAILED: fairseq-train exit 1" in text
    rows = read_csv(out / "results.csv")
    assert "broken on purpose" in rows[f"{archs[0]}.seed2"]["failed"] and not rows[archs[0]]["failed"]


def test_a_failed_model_has_a_failed_row_and_the_plots_still_draw(tmp_path, monkeypatch):
    archs = ["posnet_transformer_tiny", "rope_transformer_tiny"]
    _failing_training(monkeypatch, {archs[1]})
    out = tmp_path / "run"
    assert compare.main(["--archs", ",".join(archs), "--out", str(out), *SMALL_SYNTHETIC]) == 1  # issue 49
    text = (out / "results.md").read_text()
    failed_line = next(line for line in text.splitlines() if line.startswith(f"| `{archs[1]}`"))
    assert "FAILED" in failed_line and "broken on purpose" in failed_line
    rows = read_csv(out / "results.csv")
    assert list(rows) == archs and float(rows[archs[0]]["train_speed_ratio"]) == 1.0
    with open(out / "results.json") as f:
        assert [row["arch"] for row in json.load(f)["table"]] == archs
    assert (out / "plots" / "bleu_vs_speed.png").stat().st_size > 0


def test_all_failed_trainings_lock_nothing(tmp_path, monkeypatch, capsys):
    archs = ["posnet_transformer_tiny", "rope_transformer_tiny"]
    _failing_training(monkeypatch, set(archs))
    out = tmp_path / "run"
    argv = ["--archs", ",".join(archs), "--out", str(out), *SMALL_SYNTHETIC]
    assert compare.main(argv) == 1
    assert Steps(out).names("train/") == []
    monkeypatch.undo()
    _failing_training(monkeypatch, set(archs))
    # other flags for both models in the same --out: not refused as "other settings"
    assert compare.main([*argv, "--arch-flags", f"{archs[0]}=--dropout 0.3"]) == 1
    assert "other settings" not in capsys.readouterr().err


def test_over_long_pairs_are_left_out_and_counted(tmp_path):
    """A pair longer than every model takes is dropped up front (train: over --train-max-len too), counted in
    results.md; the length buckets never collapse into one spanning the whole test set."""
    from posnet_fairseq.compare.data import buckets_for, merge_small_buckets

    lengths = [3] * 5 + [7] * 5 + [12] * 5
    merged = merge_small_buckets(buckets_for(5000, max(lengths)), lengths, 30, 5000)
    assert len(merged) > 1 and not any(lo <= 1 and hi >= max(lengths) for lo, hi, _ in merged)

    from posnet_fairseq.data.synth import generate_pairs

    pairs = generate_pairs(120, seed=9, max_len=12)
    long = " ".join(["dog"] * 1500)
    src = [s for s, _ in pairs] + [long]
    tgt = [t for _, t in pairs] + [long]
    (tmp_path / "c.en").write_text("".join(s + "\n" for s in src))
    (tmp_path / "c.xx").write_text("".join(t + "\n" for t in tgt))
    (tmp_path / "t.en").write_text("".join(s + "\n" for s, _ in pairs[:10]) + long + "\n")
    (tmp_path / "t.xx").write_text("".join(t + "\n" for _, t in pairs[:10]) + long + "\n")
    out = tmp_path / "run"
    run_compare(["--archs", "posnet_transformer_tiny", "--raw", str(tmp_path / "c.en"), str(tmp_path / "c.xx"),
                 "--raw-test", str(tmp_path / "t.en"), str(tmp_path / "t.xx"), "--valid", "5",
                 "--vocab-size", "200", "--out", str(out), "--budget", "1u", "--interval", "1",
                 "--decode-lengths", "8", "--min-bucket-sentences", "2", *CHEAP])
    text = (out / "results.md").read_text()
    left_out = text.split("left out as longer than the models take (1024 source / 1024 target positions, EOS "
                          "included): ")[1].split("\n")[0]
    counts = dict(part.split() for part in left_out.split(", "))
    assert int(counts["train"]) + int(counts["valid"]) == 1 and counts["test"] == "1"
    assert max(len(line.split()) for line in (out / "spm_text" / "train.src").open()) < 1024
    with open(out / "quality.json") as f:
        buckets = json.load(f)["buckets"]
    assert sum(b["sentences"] for b in buckets) == 10 and len(buckets) > 1
