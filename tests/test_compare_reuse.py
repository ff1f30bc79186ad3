"""posnet-compare --reuse-from RUN: a model that finished in an earlier run with the same data (by content),
recipe, budget, seed and flags is taken from it instead of trained again; anything else trains."""
import csv
import json

import pytest

from posnet_fairseq.compare import options, training
from tests.test_compare import CHEAP, run_compare

MICRO = ["--budget", "2u", "--train-pairs", "60", "--valid", "6", "--test", "12", "--train-max-len", "10",
         "--vocab-size", "200", "--interval", "1", "--decode-lengths", "8", "--jobs", "1",
         "--min-bucket-sentences", "2", *CHEAP]
BASE, OTHER = "posnet_transformer_tiny", "aan_plus_avg_tiny"


def test_a_finished_model_of_the_same_settings_is_taken_and_others_train(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    run_compare(["--archs", f"{BASE},{OTHER}", "--out", str(first), *MICRO])
    # the same settings for BASE; OTHER with another dropout is another training
    second_argv = ["--archs", f"{BASE},{OTHER}", "--arch-flags", f"{OTHER}=--dropout 0.2", "--out", str(second),
                   "--reuse-from", str(first), *MICRO]
    printed = run_compare(second_argv)
    assert f"train: {BASE} taken from {first}" in printed, printed
    assert printed.count("train: starting") == 1 and f"train: starting {OTHER}" in printed
    taken = second / "checkpoints" / BASE / training.AVERAGE
    assert taken.read_bytes() == (first / "checkpoints" / BASE / training.AVERAGE).read_bytes()
    assert (second / "checkpoints" / f"{BASE}.train.log").read_text() == \
        (first / "checkpoints" / f"{BASE}.train.log").read_text()
    record = json.loads((second / "steps" / f"train--{BASE}.json").read_text())
    assert record["result"] == dict(json.loads((first / "steps" / f"train--{BASE}.json").read_text())["result"],
                                    reused_from=str(first))
    with open(second / "results.csv", newline="") as f:
        rows = {row["arch"]: row for row in csv.DictReader(f)}
    # the report names the run portably (compare/paths.py); the step record keeps its path
    assert rows[BASE]["reused_from"] == "first (outside the run)" and not rows[OTHER]["reused_from"]
    assert f"`{BASE}`: taken from `first (outside the run)` by --reuse-from" in (second / "results.md").read_text()
    # the second run resumes as its own: nothing trains, nothing is taken again
    again = run_compare(second_argv)
    assert "train: starting" not in again and f"train: {BASE} taken from" not in again
    assert f"train: skipped {BASE}, finished earlier" in again


def test_a_model_whose_checkpoints_were_deleted_there_trains_here(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    run_compare(["--archs", BASE, "--out", str(first), "--delete-checkpoints", *MICRO])
    printed = run_compare(["--archs", BASE, "--out", str(second), "--reuse-from", str(first), *MICRO])
    assert f"train: starting {BASE}" in printed and "taken from" not in printed
    assert (second / "checkpoints" / BASE / training.AVERAGE).is_file()


@pytest.mark.parametrize("reuse, message", [
    ("{out}", "--reuse-from {out}: that is --out itself"),
    ("{tmp}/nothing", "--reuse-from {tmp}/nothing: not a posnet-compare run (no {tmp}/nothing/steps)"),
])
def test_a_run_that_cannot_be_reused_from_is_refused(tmp_path, capsys, reuse, message):
    out = str(tmp_path / "o")
    p = options.build_parser()
    with pytest.raises(SystemExit):
        options.check_args(p, p.parse_args(["--archs", BASE, "--out", out,
                                            "--reuse-from", reuse.format(out=out, tmp=tmp_path)]))
    assert message.format(out=out, tmp=tmp_path) in capsys.readouterr().err


def test_data_bins_of_the_same_data_are_the_same_but_for_the_preprocess_log(tmp_path):
    """What --reuse-from compares: the data-bin's files by content, less fairseq-preprocess's log (it names
    the paths it ran with); a data-bin with other data is other data."""
    from posnet_fairseq.compare.steps import Steps

    bins = {}
    for name, data in (("a", b"\x01\x02"), ("b", b"\x01\x02"), ("c", b"\x01\x03")):
        bins[name] = tmp_path / name
        bins[name].mkdir()
        (bins[name] / "train.src-tgt.src.bin").write_bytes(data)
        (bins[name] / "preprocess.log").write_text(f"--destdir {bins[name]}\n")
    steps = Steps(tmp_path / "run")
    content = {name: steps.content(path, skip=training.DATA_LOG) for name, path in bins.items()}
    assert content["a"] == content["b"] != content["c"]
    assert steps.content(bins["a"]) != steps.content(bins["b"])  # the step records' own hash keeps the log
