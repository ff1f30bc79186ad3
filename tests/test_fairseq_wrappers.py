"""posnet-train / -generate / -interactive / -validate (posnet_fairseq/cli/fairseq_wrappers.py) beyond
fairseq's own behaviour: the model flags in --help with the architecture's values (posnet_fairseq/presets.py),
--show-preset, the errors said directly (posnet_fairseq/troubleshooting.py), and no import-time noise
(posnet_fairseq/tool_logging.py). Each tool runs as a user runs it, in a fresh interpreter."""
import os
import re
import subprocess
import sys

import pytest

from fairseq_testing import TINY_DIMS, write_synthetic_data_bin
from posnet_fairseq import presets, troubleshooting

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(REPO, "tests", "fixtures", "regression")


def tool(name, *argv, timeout=300):
    """(exit status, stdout + stderr) of ``posnet-NAME ARGV`` (the console script's function)."""
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1")
    env.pop("LOGLEVEL", None)
    done = subprocess.run([sys.executable, "-m", "posnet_fairseq.cli.fairseq_wrappers", name, *argv],
                          capture_output=True, text=True, env=env, timeout=timeout)
    return done.returncode, done.stdout + done.stderr


def help_entry(text, flag):
    """The help of ``flag`` in an argparse --help text, on one line."""
    match = re.search(r"^  " + re.escape(flag) + r"\b(.*?)(?=^  -|^\S|\Z)", text, re.S | re.M)
    assert match, f"{flag} not in the help"
    return " ".join(match.group(1).split())


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory):
    return write_synthetic_data_bin(str(tmp_path_factory.mktemp("wrappers")), train=60, valid=8, test=8)


def test_train_help_lists_the_model_flags_with_the_presets_values():
    status, text = tool("train", "--arch", "rposnet_transformer_tiny", "--posnet-max-relative", "4", "--help")
    assert status == 0, text[-3000:]
    assert "Model flags of rposnet_transformer_tiny" in text
    # the preset's mixer, the size's dimension, a flag given on the command line, a declared default
    assert help_entry(text, "--encoder-self-mixer").endswith("[rposnet_transformer_tiny: rposnet]")
    assert help_entry(text, "--encoder-embed-dim").endswith("[rposnet_transformer_tiny: 128]")
    assert help_entry(text, "--posnet-max-relative").endswith("[rposnet_transformer_tiny: 4]")
    assert help_entry(text, "--cross-mixer").endswith("[rposnet_transformer_tiny: mha]")
    assert help_entry(text, "--encoder-learned-pos").endswith("[rposnet_transformer_tiny: on]")
    assert "--show-preset" in text and "tensorboardX" not in text


def test_generate_help_shows_the_checkpoints_values():
    checkpoint = os.path.join(FIXTURE, "hc_gaussian", "checkpoint.pt")
    _, stored = presets.checkpoint_values(checkpoint)
    status, text = tool("generate", "--path", checkpoint, "--help")
    assert status == 0, text[-3000:]
    assert "--beam" in text  # fairseq's own generation flags stay
    source = "checkpoint"
    assert "change one with --model-overrides" in text
    assert help_entry(text, "--encoder-self-mixer").endswith(f"[{source}: {stored['encoder_self_mixer']}]")
    assert help_entry(text, "--encoder-embed-dim").endswith(f"[{source}: {stored['encoder_embed_dim']}]")
    # without --path or --arch, the plugin's flags with their defaults
    status, text = tool("validate", "--help")
    assert status == 0 and help_entry(text, "--decoder-self-mixer").endswith("[default: mha]")


def test_show_preset_prints_what_the_preset_sets():
    status, text = tool("train", "--arch", "rposnet_transformer_base", "--show-preset")
    assert status == 0, text[-3000:]
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()
            if line.startswith("--") and not line.startswith("---")}
    assert rows == {"--encoder-self-mixer": ["rposnet", "mha"], "--decoder-self-mixer": ["rposnet", "mha"],
                    "--encoder-self-gating": ["on", "off"], "--decoder-self-gating": ["on", "off"],
                    "--encoder-learned-pos": ["on", "off"], "--decoder-learned-pos": ["on", "off"]}
    # against another preset, with a flag applied to both
    assert presets.difference("rposnet_transformer_base", "aposnet_transformer_base", ["--cross-mixer", "rposnet"]) == [
        ("--decoder-learned-pos", "on", "off"), ("--decoder-self-mixer", "rposnet", "aposnet"),
        ("--encoder-learned-pos", "on", "off"), ("--encoder-self-mixer", "rposnet", "aposnet")]
    small = dict((r[0], r[1:]) for r in presets.difference("posnet_transformer_small"))
    assert small["--dropout"] == ("0.3", "0.1") and small["--encoder-ffn-embed-dim"] == ("1024", "2048")


def test_unknown_arch_suggests_the_closest():
    status, text = tool("train", "--arch", "rposnet_transfomer_base")
    assert status != 0
    assert "--arch rposnet_transfomer_base: not a registered architecture; did you mean rposnet_transformer_base" \
        in text


def test_bf16_and_cpu_data_parallel_are_refused_with_the_fix(data_bin):
    status, text = tool("train", data_bin, "--arch", "posnet_transformer_tiny", "--bf16")
    assert status != 0 and "fairseq's --bf16" in text and "TPU path" in text and "Traceback" not in text
    status, text = tool("train", data_bin, "--arch", "posnet_transformer_tiny", "--cpu",
                        "--distributed-world-size", "2")
    assert status != 0 and "--distributed-init-method tcp://localhost:PORT and --ddp-backend legacy_ddp" in text
    assert troubleshooting.check_command_line(["--cpu", "--distributed-world-size", "2", "--ddp-backend",
                                               "legacy_ddp", "--distributed-init-method", "tcp://x:1"]) is None


def test_fairseq_errors_are_said_with_the_fix(data_bin, tmp_path):
    base = [data_bin, *TINY_DIMS, "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "400",
            "--max-update", "1", "--no-save", "--num-workers", "0"]
    # a sentence over a fixed-length mixer's positions
    status, text = tool("train", *base, "--arch", "linearnet_transformer_tiny", "--linearnet-max-length", "8",
                        "--max-source-positions", "8", "--max-target-positions", "8")
    assert status != 0 and "posnet-train: sentence #" in text and "raise --max-source-positions" in text
    assert "docs/troubleshooting.md#size-of-sample-is-invalid" in text
    # shared embeddings on a data-bin with two dictionaries
    from fairseq import options
    from fairseq_cli import preprocess

    raw = os.path.join(os.path.dirname(data_bin), "raw")
    split = str(tmp_path / "split-bin")
    preprocess.main(options.get_preprocessing_parser().parse_args([
        "--source-lang", "src", "--target-lang", "tgt", "--trainpref", f"{raw}/train", "--validpref",
        f"{raw}/valid", "--destdir", split, "--workers", "1"]))
    status, text = tool("train", split, *base[1:], "--arch", "posnet_transformer_tiny", "--share-all-embeddings")
    assert status != 0 and "fairseq-preprocess --joined-dictionary" in text


def test_no_tensorboardx_hint_and_fairseqs_log_format(data_bin):
    argv = [data_bin, "--arch", "posnet_transformer_tiny", *TINY_DIMS, "--optimizer", "adam", "--lr", "1e-3",
            "--max-tokens", "400", "--max-update", "1", "--no-save", "--num-workers", "0"]
    status, text = tool("train", *argv)
    assert status == 0, text[-3000:]
    assert "tensorboardX" not in text and "DEBUG" not in text
    # fairseq-train's own log format (its basicConfig was not pre-empted by an import-time one)
    assert re.search(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \| INFO \| fairseq_cli.train \| done training", text, re.M)


def test_import_time_logging_setup_is_undone_unless_configured_first():
    code = ("import logging, posnet_fairseq, sys; r = logging.getLogger(); "
            "sys.stdout.write(f'{len(r.handlers)} {r.level}')")
    env = dict(os.environ, PYTHONPATH=REPO)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env).stdout
    assert out == f"0 {30}"  # no handler, WARNING: what a fresh interpreter has
    configured = "import logging; logging.basicConfig(level=logging.INFO); " + code
    out = subprocess.run([sys.executable, "-c", configured], capture_output=True, text=True, env=env).stdout
    assert out == f"1 {20}"  # the user's own configuration stays


def test_the_errors_link_headings_of_the_troubleshooting_page():
    from test_docs import github_anchors

    source = open(os.path.join(REPO, "posnet_fairseq", "troubleshooting.py")).read()
    anchors = re.findall(r"\{PAGE\}#([\w-]+)", source)
    assert len(anchors) == 4
    page = open(os.path.join(REPO, troubleshooting.PAGE)).read()
    assert set(anchors) <= github_anchors(page)
