"""Recipes running for real on the synthetic corpus: a table in --micro mode, and 2-process CPU training.

--micro replaces the datasets by the synthetic corpus (posnet_fairseq/synth.py),
the model dims by tiny ones and the schedule by 4 updates, and then runs the
plan a user would run: train, average checkpoints, generate, score, table.
"""
import json
import os
import subprocess
import sys


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env():
    return dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
                PYTHON=sys.executable, PYTHONPATH=REPO)


def test_micro_table_end_to_end(tmp_path):
    work = tmp_path / "work"
    proc = subprocess.run(["bash", os.path.join(REPO, "recipes", "aan", "table2.sh"), "--micro", "--work", str(work),
                           "--rows", "transformer,aan_plus_ner"], env=_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-5000:]
    assert "plancheck: 2 training commands parse" in proc.stderr
    for row in ("transformer", "aan_plus_ner"):
        ckpts = work / row / "wmt14_en_de" / "checkpoints"
        assert (ckpts / "checkpoint_1_2.pt").exists() and (ckpts / "checkpoint_1_4.pt").exists()
        assert (ckpts / "averaged.pt").exists()
        result = json.loads((work / "results" / row / "wmt14_en_de" / "test" / "result.json").read_text())
        assert result["sentences"] == 20 and result["params"] > 0
        assert result["sacrebleu"]["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
        assert 0.0 <= result["bleu_tok"]["score"] <= 100.0
    result = json.loads((work / "results" / "aan_plus_ner" / "wmt14_en_de" / "test" / "result.json").read_text())
    assert 0.0 <= result["significance"]["sacrebleu"]["p_value"] <= 1.0
    table = (work / "aan-table2.md").read_text()
    assert table.startswith("## AAN+ paper, Table 2")
    lines = {line.split(" | ")[0]: line for line in table.splitlines() if line.startswith("| ")}
    assert " - " not in lines["| Transformer"].split("|")[2] and "| AAN+ NER |" in table
    assert lines["| AAN+ WET"].count(" - ") == 3  # rows not run are marked, not invented
    assert (work / "aan-table2.csv").read_text().startswith("Model,tok. BLEU (ours),tok. BLEU (paper)")


def test_micro_en_zh_column_with_a_valid_sentence_over_the_length_limit(tmp_path):
    """PosNet Table 2's En-Zh rows in --micro mode. The micro corpus has a valid pair longer than the
    models' --max-*-positions (as real valid sets have one over 128), which fairseq skips in validation
    only with --skip-invalid-size-inputs-valid-test; generation translates every test sentence."""
    work = tmp_path / "work"
    proc = subprocess.run(["bash", os.path.join(REPO, "recipes", "posnet", "table2.sh"), "--micro", "--work", str(work),
                           "--rows", "transformer,rposnet", "--datasets", "wmt18_en_zh"],
                          env=_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-5000:]
    valid = (work / "data" / "synth" / "raw" / "valid.src").read_text().splitlines()
    assert len(valid[-1].split()) > 40 and max(len(line.split()) for line in valid[:-1]) <= 30
    assert proc.stderr.count("1 samples have invalid sizes and will be skipped, max_positions=(32, 32)") == 2
    for row in ("transformer", "rposnet"):
        result = json.loads((work / "results" / row / "wmt18_en_zh" / "test" / "result.json").read_text())
        assert result["sentences"] == 20 and result["missing"] == 0, result
    assert not (work / "results" / "rposnet" / "wmt18_en_zh" / "test1").exists()


DUMP = r"""
import sys, torch
import fairseq_cli.train as train
from fairseq.trainer import Trainer
out = sys.argv.pop(1)
made = []
class Recording(Trainer):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        made.append(self)
train.Trainer = Recording
sys.argv = ["fairseq-train"] + sys.argv[1:]
train.cli_main()
t = made[0]
state = {k: v.detach().clone() for k, v in t.get_model().state_dict().items()}
torch.save({"state": state, "updates": t.get_num_updates(), "world": t.data_parallel_world_size},
           f"{out}/rank{t.data_parallel_rank}.pt")
"""


def test_two_process_cpu_data_parallel_training_gives_identical_parameters(tmp_path):
    """The recipes' --cpu-procs launcher: 2 gloo ranks, legacy_ddp, a position-mixer model (rposnet)."""
    import torch

    data = tmp_path / "data"
    subprocess.run(["bash", os.path.join(REPO, "recipes", "data", "prepare-synth.sh"), "--out", str(data),
                    "--workers", "1", "--train", "120"], env=_env(), check=True, capture_output=True)
    (tmp_path / "dump.py").write_text(DUMP)
    port = 20000 + os.getpid() % 20000
    cmd = [sys.executable, "-m", "posnet_fairseq.recipe_tools.launch", "--procs", "2", "--",
           sys.executable, str(tmp_path / "dump.py"), str(tmp_path),
           str(data / "data-bin"), "--user-dir", os.path.join(REPO, "posnet_fairseq"),
           "--arch", "posnet_transformer_tiny", "--encoder-self-mixer", "rposnet", "--decoder-self-mixer", "rposnet",
           "--encoder-embed-dim", "16", "--decoder-embed-dim", "16", "--encoder-ffn-embed-dim", "32",
           "--decoder-ffn-embed-dim", "32", "--encoder-layers", "1", "--decoder-layers", "1",
           "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
           "--optimizer", "adam", "--lr", "0.001", "--max-tokens", "300", "--max-update", "3", "--seed", "1",
           "--save-dir", str(tmp_path / "ckpt"), "--no-save", "--disable-validation", "--num-workers", "0",
           "--cpu", "--distributed-world-size", "2", "--distributed-backend", "gloo",
           "--distributed-init-method", f"tcp://127.0.0.1:{port}", "--distributed-no-spawn",
           "--ddp-backend", "legacy_ddp"]
    proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-5000:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1)]
    assert [r["world"] for r in ranks] == [2, 2] and [r["updates"] for r in ranks] == [3, 3]
    a, b = ranks[0]["state"], ranks[1]["state"]
    assert a.keys() == b.keys()
    # the self-attention sites are rPosNet (position-only energies: no key projection), not fairseq's MHA
    assert not any(k.startswith("encoder.layers.0.self_attn.k_proj") for k in a)
    assert any(k.startswith("encoder.layers.0.self_attn.") for k in a)
    for key in a:
        assert torch.equal(a[key], b[key]), key
