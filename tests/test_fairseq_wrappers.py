"""posnet-train / -generate / -interactive / -validate (posnet_fairseq/cli/fairseq_wrappers.py) beyond
fairseq's own behaviour: the model flags in --help with the architecture's values (posnet_fairseq/presets.py),
--show-preset, the errors said directly (posnet_fairseq/troubleshooting.py), and no import-time noise
(posnet_fairseq/tool_logging.py). Each tool runs as a user runs it, in a fresh interpreter."""
import os
import re
import signal
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
    assert len(anchors) == 8
    page = open(os.path.join(REPO, troubleshooting.PAGE)).read()
    assert set(anchors) <= github_anchors(page)


TRAIN = ["--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "400", "--num-workers", "0", "--no-progress-bar",
         "--disable-validation", "--no-epoch-checkpoints", *TINY_DIMS]


def test_a_refused_model_flag_is_printed_alone_with_status_2(data_bin):
    """Issue 27: the plugin's refusal of a model flag came with a traceback and exit status 1."""
    status, text = tool("train", data_bin, "--arch", "posnet_transformer_tiny", *TRAIN, "--no-save",
                        "--max-update", "1", "--encoder-self-mixer", "hc_gaussian", "--hc-sigma", "-1")
    assert status == 2 and "Traceback" not in text, text[-2000:]
    assert text.rstrip().splitlines()[-1] == "posnet-train: error: --hc-sigma -1.0: must be a positive number"


def test_generate_says_that_arch_is_not_used():
    """Issue 27.6: posnet-generate --arch X translated with the checkpoint's model without a word."""
    status, text = tool("generate", os.path.join(FIXTURE, "data-bin"), "--path",
                        os.path.join(FIXTURE, "transformer", "checkpoint.pt"), "--arch", "rope_transformer_tiny",
                        "--beam", "2", "--max-len-b", "5", "--batch-size", "8", "--gen-subset", "valid")
    assert status == 0, text[-2000:]
    assert "posnet-generate: warning: --arch rope_transformer_tiny is not used: the model is rebuilt as the " \
           "checkpoint stores it (--arch posnet_transformer_tiny" in text


def test_a_truncated_checkpoint_is_said_in_one_line(tmp_path):
    truncated = tmp_path / "checkpoint_best.pt"
    truncated.write_bytes(open(os.path.join(FIXTURE, "transformer", "checkpoint.pt"), "rb").read()[:20000])
    status, text = tool("generate", os.path.join(FIXTURE, "data-bin"), "--path", str(truncated))
    assert status == 1 and "Traceback" not in text
    assert text.rstrip().splitlines()[-1].startswith(f"posnet-generate: --path {truncated} is not a complete "
                                                     "checkpoint (")
    assert "copy it again" in text


def test_resuming_a_save_dir_of_another_model_is_refused(data_bin, tmp_path):
    """Issue 27: rope_transformer_tiny has posnet_transformer_tiny's parameter names, so fairseq resumed the
    other model's checkpoint_last.pt without a word."""
    save = tmp_path / "save"
    save.mkdir()
    (save / "checkpoint_last.pt").write_bytes(open(os.path.join(FIXTURE, "transformer", "checkpoint.pt"),
                                                   "rb").read())
    status, text = tool("train", data_bin, "--arch", "rope_transformer_tiny", *TRAIN, "--max-update", "1",
                        "--save-dir", str(save))
    assert status == 1 and "Traceback" not in text
    assert f"posnet-train: --save-dir {save} holds a checkpoint of another model (--arch rope_transformer_tiny " \
           "vs posnet_transformer_tiny: this command vs checkpoint_last.pt)" in text


def test_a_checkpoint_last_truncated_by_an_interrupted_copy_is_restored_to_resume(data_bin, tmp_path):
    """fairseq copied a checkpoint it had written to checkpoint_last.pt non-atomically (before the plugin made
    the copy atomic, or without the plugin): a job killed during the copy left it truncated, and the re-run
    could not resume (seen with a requeued SLURM job)."""
    save = tmp_path / "save"
    common = [data_bin, "--arch", "posnet_transformer_tiny", *TRAIN, "--save-dir", str(save),
              "--save-interval-updates", "1", "--keep-interval-updates", "3"]
    status, text = tool("train", *common, "--max-update", "2")
    assert status == 0, text[-2000:]
    last = save / "checkpoint_last.pt"
    last.write_bytes(last.read_bytes()[:20000])
    status, text = tool("train", *common, "--max-update", "3")
    assert status == 0, text[-2000:]
    assert f"posnet-train: {last} was truncated (a training stopped while fairseq copied it there); restored " \
           f"from {save / 'checkpoint_1_2.pt'}, the newest intact checkpoint of the run" in text
    assert re.search(r"[Ll]oaded checkpoint \S*checkpoint_last\.pt \(epoch 1 @ 2 updates\)", text), text[-2000:]


def test_fairseq_train_copies_a_saved_checkpoint_atomically(tmp_path, monkeypatch):
    """A stop during fairseq-train's copy of a saved checkpoint to checkpoint_last.pt leaves the previous
    checkpoint_last.pt whole (compat.make_checkpoint_copies_atomic), and a copy that completes replaces it."""
    import shutil

    import posnet_fairseq  # noqa: F401 (makes the copies atomic)
    from fairseq.file_io import PathManager

    saved, last = tmp_path / "checkpoint_1_3.pt", tmp_path / "checkpoint_last.pt"
    saved.write_bytes(b"new" * 1000)
    last.write_bytes(b"old" * 1000)
    copyfile = shutil.copyfile

    def stopped(src, dst, **kwargs):  # a kill after the first bytes
        with open(dst, "wb") as f:
            f.write(b"ne")
        raise KeyboardInterrupt

    monkeypatch.setattr(shutil, "copyfile", stopped)
    with pytest.raises(KeyboardInterrupt):
        PathManager.copy(str(saved), str(last), overwrite=True)
    assert last.read_bytes() == b"old" * 1000
    monkeypatch.setattr(shutil, "copyfile", copyfile)
    assert PathManager.copy(str(saved), str(last), overwrite=True)
    assert last.read_bytes() == saved.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint_1_3.pt", "checkpoint_last.pt"]


def test_a_checkpoint_of_another_data_bin_is_said_with_the_cause(data_bin):
    checkpoint = os.path.join(FIXTURE, "transformer", "checkpoint.pt")
    status, text = tool("generate", data_bin, "--path", checkpoint, "--beam", "2", "--batch-size", "8")
    assert status == 1 and "Traceback" not in text, text[-2000:]
    assert re.search(rf"posnet-generate: {re.escape(checkpoint)} was trained with a dictionary of 360 entries but "
                     r"the data-bin's has \d+: another data-bin \(it was trained on ", text)


@pytest.mark.parametrize("signum,status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_training_says_it_resumes_and_exits_with_the_signals_status(data_bin, tmp_path, signum,
                                                                                     status):
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1")
    child = subprocess.Popen(
        [sys.executable, "-m", "posnet_fairseq.cli.fairseq_wrappers", "train", data_bin, "--arch",
         "posnet_transformer_tiny", *TRAIN, "--max-update", "100000", "--save-dir", str(tmp_path / "save")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        # a shell's background job ignores SIGINT, and its children would inherit that
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines = []
    for line in child.stdout:  # fairseq-train's log (on stdout): interrupt once the training loop runs
        lines.append(line)
        if "begin training epoch 1" in line:
            break
    child.send_signal(signum)
    lines += child.stdout.readlines()
    assert child.wait(timeout=120) == status, "".join(lines[-30:])
    assert lines[-1] == "posnet-train: interrupted; the same command resumes\n"
    assert not any("Traceback" in line for line in lines)


def test_a_full_disk_names_the_save_dir_and_leaves_no_tmp_file(data_bin, tmp_path):
    save = tmp_path / "save"
    # fairseq's atomic save on a full disk: a partial NAME.pt.tmp, then OSError 28 (seen on a small tmpfs)
    full_disk = ("import errno\n"
                 "from fairseq import checkpoint_utils\n"
                 "def save(obj, filename, async_write=False):\n"
                 "    open(filename + '.tmp', 'wb').write(b'partial')\n"
                 "    raise OSError(errno.ENOSPC, 'No space left on device')\n"
                 "checkpoint_utils.torch_persistent_save = save\n"
                 "from posnet_fairseq.cli import fairseq_wrappers\n"
                 "fairseq_wrappers.train()\n")
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", full_disk, data_bin, "--arch", "posnet_transformer_tiny", *TRAIN,
                           "--max-update", "1", "--save-dir", str(save)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.splitlines()[-1].startswith(f"posnet-train: no space left on {save}: free space there")
    assert os.listdir(save) == []


def test_model_overrides_that_change_the_model_are_refused_with_the_fix():
    """Issue 49 item 4: --model-overrides "{'encoder_self_mixer': 'rposnet'}" ended in torch's state_dict
    traceback; another mixer with the same parameters would have loaded without a word."""
    said = "--model-overrides changes how a model decodes, not what it is ({}): retrain with the new flag"
    for overrides, named in [("{'encoder_self_mixer': 'rposnet'}", "encoder_self_mixer"),
                             ("{'decoder_self_mixer': 'rope'}", "decoder_self_mixer"),  # same parameters
                             ("{'encoder_layers': 3}", "encoder_layers")]:  # the parameters do not load
        status, text = tool("generate", os.path.join(FIXTURE, "data-bin"), "--path",
                            os.path.join(FIXTURE, "transformer", "checkpoint.pt"), "--model-overrides", overrides,
                            "--beam", "2", "--max-len-b", "5", "--batch-size", "8", "--gen-subset", "valid")
        assert status == 1 and "Traceback" not in text, text[-2000:]
        assert text.rstrip().splitlines()[-1].startswith("posnet-generate: " + said.format(named))


def test_rope_scaling_on_a_model_without_rope_is_refused():
    """Issue 49 item 6: exit 0, no word, the same hypotheses as without the scaling."""
    for overrides, said in [("{'rope_scaling': 'yarn', 'rope_scaling_factor': 'auto', "
                             "'rope_scaling_train_length': 8}", "--rope-scaling yarn: the model has no rope mixer"),
                            ("{'rope_scaling': 'yarn', 'rope_scaling_factor': 'auto'}",
                             "--rope-scaling-factor auto: needs --rope-scaling-train-length")]:
        status, text = tool("generate", os.path.join(FIXTURE, "data-bin"), "--path",
                            os.path.join(FIXTURE, "transformer", "checkpoint.pt"), "--model-overrides", overrides,
                            "--beam", "2", "--max-len-b", "5", "--batch-size", "8", "--gen-subset", "valid")
        assert status == 2 and "Traceback" not in text, text[-2000:]
        assert text.rstrip().splitlines()[-1].startswith(f"posnet-generate: error: {said}")


@pytest.mark.parametrize("fixture,arch,flag", [
    ("linearnet", "linearnet_transformer_tiny", ["--linearnet-max-length", "0"]),
    ("rposnet", "rposnet_transformer_tiny", ["--posnet-max-relative", "-1"])])
def test_a_bad_flag_value_is_named_whatever_the_save_dir_holds(data_bin, tmp_path, fixture, arch, flag):
    """Issue 49 item 5: a ValueError traceback from the resume check, or "a checkpoint of another model (-1 vs
    16)"."""
    save = tmp_path / "save"
    save.mkdir()
    (save / "checkpoint_last.pt").write_bytes(open(os.path.join(FIXTURE, fixture, "checkpoint.pt"), "rb").read())
    status, text = tool("train", data_bin, "--arch", arch, *TRAIN, "--max-update", "1", "--save-dir", str(save),
                        *flag)
    assert status == 2 and "Traceback" not in text, text[-2000:]
    assert text.rstrip().splitlines()[-1].startswith(f"posnet-train: error: {' '.join(flag)}: must be ")
