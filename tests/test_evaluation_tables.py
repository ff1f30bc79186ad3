"""posnet_fairseq/evaluation/tables.py: the papers' tables, their figures, and our results collected beside them."""
import json
import os

from posnet_fairseq.evaluation import tables
from posnet_fairseq.table_runs import aan, posnet
from posnet_fairseq.table_runs.papers import TABLES

PN_DE, AAN_DE = posnet.EN_DE, aan.EN_DE


def _result(path, **scores):
    os.makedirs(path, exist_ok=True)
    data = {k: {"score": v, "signature": f"sig-{k}"} for k, v in scores.items() if k != "params"}
    if "params" in scores:
        data["params"] = scores["params"]
    if path.endswith(f"rposnet/{PN_DE}/test"):
        data["significance"] = {"transformer": {"sacrebleu": {"significant": True}, "comet": {"significant": False}}}
    with open(os.path.join(path, "result.json"), "w") as f:
        json.dump(data, f)


def test_table_collect_markdown_and_csv(tmp_path):
    res = str(tmp_path / "results")
    _result(f"{res}/transformer/{PN_DE}/test", sacrebleu=27.1, bleurt=0.7123, comet=0.4801, params=66_512_384)
    _result(f"{res}/rposnet/{PN_DE}/test", sacrebleu=27.6, bleurt=0.7, comet=0.5, params=63_000_000)
    md, csv_path = tables.write("posnet-table2", res, str(tmp_path / "t2"))
    text_md = open(md).read()
    # BLEURT and COMET times 100, as the paper; † marks rPosNet's sacreBLEU difference to the Transformer
    assert "| rPosNet | 63.00M | 63.9M | 27.60† | 26.6 | 70.00 | 71.4† | 50.00 | 48.6 |" in text_md
    assert "| Transformer | 66.51M | 66.5M | 27.10 | 26.3 | 71.23 | 71.1 | 48.01 | 47.6 | - | 37.8 |" in text_md
    assert "`‡`: differs from Shaw et al. (2018)" in text_md and "sig-sacrebleu" in text_md
    import csv

    rows = list(csv.reader(open(csv_path)))
    assert rows[0][:3] == ["Model", "Params (En-De) (ours)", "Params (En-De) (paper)"]
    assert rows[-1][:3] == ["rPosNet", "63.00M", "63.9M"] and len(rows) == 1 + len(TABLES["posnet-table2"].rows)


def test_speed_columns_are_ratios_to_the_reference_row(tmp_path):
    res = str(tmp_path / "results")
    for row, seconds, wps in (("transformer", 60.0, 10000.0), ("aan_plus_avg", 48.0, 10300.0)):
        path = f"{res}/{row}/{AAN_DE}/test"
        os.makedirs(path)
        with open(os.path.join(path, "result.json"), "w") as f:
            json.dump({"decode_seconds": {"seconds": seconds}, "train_wps": {"wps": wps},
                       "meteor": {"available": False, "reason": "nltk is not installed"}}, f)
    header, rows = tables.collect("aan-table2", res)
    line = dict(zip(header, next(r for r in rows if r[0] == "AAN+ w/ AVG")))
    assert (line["ΔTrain (ours)"], line["ΔDecode (ours)"], line["ΔDecode (paper)"]) == ("1.03x", "1.25x", "1.32x")
    assert line["En-De METEOR (ours)"] == "n/a" and line["En-De BLEU (ours)"] == "-"


def test_sentences_per_second_are_absolute(tmp_path):
    """You et al. Tables 3 and 7 print sentences per second; ours come from fairseq-generate's timing."""
    res = str(tmp_path / "results")
    path = f"{res}/hc_sa/wmt16_en_ro_nodiacritics/test"
    os.makedirs(path)
    with open(os.path.join(path, "result.json"), "w") as f:
        json.dump({"decode_seconds": {"seconds": 70.0, "sentences": 1999}}, f)
    header, rows = tables.collect("gaussian-table3", res)
    line = dict(zip(header, next(r for r in rows if r[0] == "HC-SA")))
    assert (line["En-Ro sent/sec (ours)"], line["En-Ro sent/sec (paper)"]) == ("28.6", "28.4")
    assert line["En-Ro BLEU (ours)"] == "-"
