"""results.md names files and folders portably (posnet_fairseq/compare/paths.py, issue 46 item 6): inside the
run relative to it, outside it by name and "(outside the run)", a relative path as typed."""
import os
import shlex

from posnet_fairseq.compare import paths

OUT = "/machine/runs/bible"


def test_a_path_inside_the_run_is_relative_to_it_and_one_outside_is_its_name():
    assert paths.portable(f"{OUT}/raw/test.tgt", OUT) == "raw/test.tgt"
    assert paths.portable(OUT, OUT) == "."
    assert paths.portable("/machine/data/train.es", OUT) == "train.es (outside the run)"
    # a sibling whose name starts with the run's is outside it
    assert paths.portable(f"{OUT}-seed1/raw", OUT) == "raw (outside the run)"


def test_the_command_line_names_absolute_paths_portably_and_keeps_the_rest():
    argv = ["--archs", "a,b", "--raw", "/machine/data/train.es", "data/train.en", "--out", OUT,
            f"--reuse-from={OUT}-seed1", "--model-flags", "--dropout 0.3"]
    made = paths.command(argv, OUT)
    assert shlex.split(made) == ["--archs", "a,b", "--raw", "train.es (outside the run)", "data/train.en",
                                 "--out", ".", "--reuse-from=bible-seed1 (outside the run)", "--model-flags",
                                 "--dropout 0.3"]


def test_a_text_names_the_users_paths_portably_once_and_leaves_other_words(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    given = ["/machine/data/test.es", "/machine/data/test.en", "train.es", OUT]
    text = ("/machine/data/test.es / /machine/data/test.en: 12 pairs; train.es kept as typed; "
            f"{tmp_path}/train.es absolute; {OUT}/raw inside; {OUT}-seed1 another run")
    assert paths.portable_text(text, given, OUT) == (
        "test.es (outside the run) / test.en (outside the run): 12 pairs; train.es kept as typed; "
        f"train.es (outside the run) absolute; ./raw inside; {OUT}-seed1 another run")
    assert os.path.abspath("train.es") == f"{tmp_path}/train.es"
