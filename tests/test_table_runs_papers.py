"""posnet_fairseq/table_runs/: the paper tables as declared (table.py, the paper modules, papers.py) and
rows.py, which hands them to the recipes."""
import os
import subprocess
import sys

import pytest

from posnet_fairseq.table_runs import aan, datasets, posnet, rows
from posnet_fairseq.table_runs.papers import TABLES
from posnet_fairseq.table_runs.table import Table, col, flags, run, Settings

PN_DE, AAN_DE, AAN_FR = posnet.EN_DE, aan.EN_DE, aan.EN_FR
ROWS_PY = rows.__file__


def test_a_declaration_refuses_figures_and_runs_that_fit_no_row():
    settings = Settings(flags("--lr 1"), (), "last 1")
    columns = [col("d", "sacrebleu", "BLEU"), col("d", "params", "Params")]
    runs = [run("a", "d", settings, flags("--arch x"))]
    assert Table("t", "T", columns, [("a", "A")], runs, paper={"a": "1.0 ."}).figures == {"a": {"d:sacrebleu": "1.0"}}
    with pytest.raises(ValueError, match="paper row a: 1 figures for 2 columns"):
        Table("t", "T", columns, [("a", "A")], runs, paper={"a": "1.0"})
    with pytest.raises(ValueError, match="paper row b"):
        Table("t", "T", columns, [("a", "A")], runs, paper={"b": "1.0 2"})
    with pytest.raises(ValueError, match="the runs' rows"):
        Table("t", "T", columns, [("a", "A"), ("b", "B")], runs)


def test_a_declaration_refuses_an_averaging_whose_checkpoints_may_be_deleted():
    """Issue 31 point 7: 'best N' with --keep-interval-updates (which deletes the update checkpoints after an early
    best) needs fairseq's --keep-best-checkpoints N, refused when the table is declared (its dry run)."""
    with pytest.raises(ValueError, match="'best 7' needs --keep-best-checkpoints 7 .*--keep-interval-updates 21"):
        Settings(flags("--keep-interval-updates 21"), (), "best 7")
    with pytest.raises(ValueError, match="'last 5' needs --keep-interval-updates 5 or more"):
        Settings(flags("--keep-interval-updates 4"), (), "last 5")
    Settings(flags("--keep-interval-updates 21 --keep-best-checkpoints 7"), (), "best 7")
    Settings((), (), "best 7")  # nothing deleted: every checkpoint is kept
    for table in TABLES.values():  # the PosNet sizes (and TISA's, which are theirs) keep the N best
        for r in table.runs:
            rule, count = r.settings.avg.split()
            if rule == "best":
                assert r.flags[r.flags.index("--keep-best-checkpoints") + 1] == count, (table.name, r.row)


def test_every_dataset_a_table_runs_on_is_a_prepared_one():
    for name, table in TABLES.items():
        ran = {r.dataset for r in table.runs}
        assert ran <= set(datasets.DATASETS), name
        assert {c.dataset for c in table.columns if c.ours} == ran, name


def _bash_words(script):
    """What bash makes of rows.py's statements: the words of each `row`, and the settings before it."""
    shim = ('row() { printf "%s\\n" "ROW|$AVG|$TOKENS|${GEN[*]}|${EVAL[*]-}|$*"; }; MICRO_FLAGS=(); '
            'eval "$(cat)"; printf "BASELINES|%s\\nMICRO|%s\\n" "$BASELINES" "${MICRO_FLAGS[*]-}"')
    out = subprocess.run(["bash", "-c", shim], input=script, capture_output=True, text=True, check=True).stdout
    return out.splitlines()


@pytest.mark.parametrize("name", ["posnet-table3", "aan-table5", "gaussian-figure7", "tisa-mt"])
def test_rows_reach_the_shell_word_for_word(name):
    table = TABLES[name]
    lines = _bash_words(rows.shell(table))
    expected = [f"ROW|{r.settings.avg}|{r.settings.tokens}|{' '.join(r.settings.gen)}|{' '.join(r.settings.eval)}|"
                + " ".join((r.row, r.dataset) + r.flags) for r in table.runs]
    assert lines == expected + [f"BASELINES|{' '.join(table.baselines)}", f"MICRO|{' '.join(table.micro_flags)}"]
    assert "--adam-betas (0.9,0.98)" in lines[0]  # a value the shell would otherwise read as syntax


def test_rows_run_as_a_file_without_loading_fairseq(tmp_path):
    """The recipes' dry runs need no fairseq: rows.py, run as a file as common.sh runs it, works where importing
    fairseq fails."""
    (tmp_path / "fairseq").mkdir()
    (tmp_path / "fairseq" / "__init__.py").write_text("raise ImportError('fairseq was imported')\n")
    proc = subprocess.run([sys.executable, ROWS_PY, "aan-table2"], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == rows.shell(TABLES["aan-table2"]) + "\n"
    proc = subprocess.run([sys.executable, ROWS_PY, "aan-table3"], capture_output=True, text=True)
    assert proc.returncode == 2 and "invalid choice: 'aan-table3'" in proc.stderr


def test_the_gaussian_papers_speed_figures_repeat_its_table_2():
    """Tables 2, 3 and 7 print the same BLEU for a model (Table 3 = Table 2's En-Ro, Table 7 = Table 2's IWSLT16
    En-De), except where the paper itself differs: SH-X 30.3 vs 30.4 (En-Ro) and 28.1 vs 28.2 (En-De)."""
    t2 = TABLES["gaussian-table2"].figures
    for row in ("base", "hc_sa", "sh_x"):
        t3, t7 = TABLES["gaussian-table3"].figures[row], TABLES["gaussian-table7"].figures[row]
        same = {"sh_x": False}.get(row, True)
        assert (t3["wmt16_en_ro_nodiacritics:sacrebleu"] == t2[row]["wmt16_en_ro_nodiacritics:sacrebleu"]) is same, row
        assert (t7["iwslt16_en_de:sacrebleu"] == t2[row]["iwslt16_en_de:sacrebleu"]) is same, row




def _figures(table, row, *datasets):
    """The paper's figures of one row, without significance marks, keyed by metric (first dataset first)."""
    cells = TABLES[table].figures[row]
    out = {}
    for ds in datasets:
        out.update({k.split(":", 1)[1]: v.rstrip("†‡") for k, v in cells.items() if k.startswith(ds + ":")})
    return out


def test_paper_figures_agree_where_the_papers_repeat_them():
    """A transcription check: the papers print some models in several tables, with the same figures."""
    t2 = lambda row, ds=PN_DE: _figures("posnet-table2", row, ds)  # noqa: E731
    for t4_row, t2_row in (("transformer", "transformer"), ("enc_dec", "rposnet")):
        t4 = _figures("posnet-table4", t4_row, PN_DE)
        assert t4 == {k: v for k, v in t2(t2_row).items() if k != "params"}, t4_row
    for row in ("lightconv", "rposnet"):
        t5 = _figures("posnet-table5", row, "wmt18_en_zh")
        assert {k: v for k, v in t5.items() if k != "params"} == t2(row, "wmt18_en_zh"), row
    for t6_row, t2_row in (("transformer", "transformer"), ("shaw", "shaw"), ("aposnet", "aposnet"),
                           ("rposnet", "rposnet")):
        assert _figures("posnet-table6", t6_row, PN_DE) == t2(t2_row), t6_row
    a2 = lambda row: {k: v for k, v in _figures("aan-table2", row, AAN_DE).items()  # noqa: E731
                      if k in ("params", "bleu_tok", "meteor")}
    for t5_row, t2_row in (("transformer", "transformer"), ("ner_exp", "aan_plus_ner"), ("wet_exp", "aan_plus_wet")):
        assert _figures("aan-table5", t5_row, AAN_DE) == a2(t2_row), t5_row
    for t6_row, t2_row in (("transformer", "transformer"), ("avg", "aan_plus_avg"), ("far", "aan_plus_far"),
                           ("ner", "aan_plus_ner"), ("wet", "aan_plus_wet")):
        t6 = _figures("aan-table6", t6_row, AAN_DE)
        assert {k: v for k, v in t6.items() if k != "decode_speed"} == a2(t2_row), t6_row
    # WET's U (d x d per decoder layer) is the only parameter difference between the patterns
    for table, suffix, layers, d in (("aan-table2", "", 6, 512), ("aan-table7", "", 6, 512),
                                     ("aan-table4", "_deep", 12, 512), ("aan-table4", "_big", 6, 1024)):
        ds = AAN_FR if table == "aan-table7" else AAN_DE
        wet, avg = (float(_figures(table, f"aan_plus_{p}{suffix}", ds)["params"].rstrip("M")) for p in ("wet", "avg"))
        assert abs((wet - avg) - layers * d * d / 1e6) < 0.015, (table, suffix)
