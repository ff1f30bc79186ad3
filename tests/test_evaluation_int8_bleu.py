"""posnet_fairseq/evaluation/int8_bleu.py: int8 against fp32 BLEU with a paired-bootstrap interval, the hypotheses
int8 changed, and issue 48's verdict (within 0.3 BLEU) decided by the interval."""
import pytest

from posnet_fairseq.evaluation import bootstrap, int8_bleu

REFS = [f"the cat number {i} sat on the mat today ." for i in range(60)]
WRONG = [f"a dog number {i} stood near a rug ." for i in range(60)]


@pytest.mark.parametrize("low, high, expected", [
    (-0.29, 0.29, "within"),
    (-0.3, 0.3, "within"),  # the ends count as within
    (-0.31, 0.1, "cannot tell"),
    (0.1, 0.5, "cannot tell"),
    (-0.9, -0.31, "not within"),
    (0.31, 0.9, "not within"),
    (-1.0, 1.0, "cannot tell"),  # a wide interval decides nothing, whatever its middle
])
def test_verdict_is_decided_by_the_interval(low, high, expected):
    assert int8_bleu.verdict(low, high, 0.3) == expected


def test_identical_decodings_are_within_with_a_zero_interval():
    result = int8_bleu.compare(REFS, list(REFS), REFS, 0.3, samples=100, seed=1)
    assert result["fp32"] == result["int8"] == pytest.approx(100.0) and result["delta"] == 0.0
    assert (result["low"], result["high"], result["changed"], result["verdict"]) == (0.0, 0.0, 0, "within")


def test_a_worse_int8_decoding_is_not_within_and_its_changes_are_counted():
    int8 = WRONG[:30] + REFS[30:]
    result = int8_bleu.compare(REFS, int8, REFS, 0.3, samples=200, seed=1)
    assert result["changed"] == 30
    assert result["fp32"] == pytest.approx(100.0) and result["int8"] < 90
    assert result["low"] <= result["delta"] <= result["high"] < -0.3
    assert result["verdict"] == "not within"


def test_the_interval_is_the_bootstraps_and_its_seed_decides_it():
    metric = bootstrap.make_metric("bleu", tokenize="none")
    fp32 = WRONG[:20] + REFS[20:]
    int8 = REFS[:10] + WRONG[10:25] + REFS[25:]  # fixes 10 sentences, breaks 5
    result = int8_bleu.compare(fp32, int8, REFS, 0.3, samples=300, seed=5)
    delta, low, high = bootstrap.difference(metric, int8, fp32, REFS, 300, 5)
    assert (result["delta"], result["low"], result["high"]) == (delta, low, high)
    assert delta == pytest.approx(metric.corpus_score(int8, [REFS]).score - metric.corpus_score(fp32, [REFS]).score)
    assert low < delta < high and result["changed"] == 15
    assert bootstrap.difference(metric, int8, fp32, REFS, 300, 6) != (delta, low, high)


def test_row_prints_scores_interval_changes_and_verdict():
    result = {"fp32": 41.7, "int8": 41.8, "delta": 0.1, "low": -0.04, "high": 0.65, "changed": 812,
              "verdict": "cannot tell"}
    assert int8_bleu.row("aan_plus_avg_tiny", "int8", result, 5000) == (
        "| aan_plus_avg_tiny | int8 | 41.70 | 41.80 | +0.10 (-0.04 to +0.65) | 812 of 5000 | cannot tell |")


@pytest.mark.parametrize("argv, message", [
    (["--updates", "0"], "--updates 0: expected at least 1"),
    (["--sentences", "-3"], "--sentences -3: expected at least 1"),
    (["--samples", "0"], "--samples 0: expected at least 1"),
    (["--tolerance", "0"], "--tolerance 0.0: expected a positive number of BLEU points"),
])
def test_bad_flags_name_themselves(argv, message):
    with pytest.raises(SystemExit, match=message):
        int8_bleu.parse(argv)


def test_a_tiny_run_prints_what_ran_and_a_row_per_export_and_a_rerun_reuses_its_model(tmp_path, capsys):
    """A second run in the same --workdir (another int8 scheme, the same models) decodes the checkpoint of the same
    arch, seed and updates as it is: fairseq would resume it and train one update more."""
    int8_bleu.main(["--archs", "aan_plus_avg", "--updates", "3", "--seed", "2", "--sentences", "12",
                    "--samples", "50", "--workdir", str(tmp_path)])
    out = capsys.readouterr().out
    assert "3 updates, seed 2, on 2000 synthetic sentences" in out
    assert "scored on 12 other synthetic sentences" in out and "50 resamples" in out
    rows = [line for line in out.splitlines() if line.startswith("| aan_plus_avg_tiny |")]
    assert [line.split(" | ")[1] for line in rows] == ["int8", "int8, fp32 output", "int8, FBGEMM"]
    assert "the int8 engine of this machine (--int8-engine auto): " in out
    for line in rows:
        cells = line.strip("| ").split(" | ")
        changed, of = cells[5].split(" of ")
        assert 0 <= int(changed) <= int(of) == 12
        assert cells[6] in ("within", "not within", "cannot tell")
    checkpoint = str(tmp_path / "aan_plus_avg_tiny" / "checkpoint_last.pt")
    assert int8_bleu.trained(checkpoint, "aan_plus_avg_tiny", 3, 2)
    for other in [("aan_plus_avg_tiny", 4, 2), ("aan_plus_avg_tiny", 3, 1), ("hc_gaussian_tiny", 3, 2)]:
        assert not int8_bleu.trained(checkpoint, *other)
    assert not int8_bleu.trained(str(tmp_path / "none.pt"), "aan_plus_avg_tiny", 3, 2)
    with open(checkpoint, "rb") as f:
        before = f.read()
    assert int8_bleu.train(str(tmp_path / "data-bin-12"), "aan_plus_avg_tiny", str(tmp_path / "aan_plus_avg_tiny"),
                           3, 2) == checkpoint
    with open(checkpoint, "rb") as f:
        assert f.read() == before
