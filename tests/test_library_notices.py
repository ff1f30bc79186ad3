"""posnet_fairseq/tool_logging.py: a tool or a benchmark prints no library deprecation notice before its output
(hydra's on fairseq's config API, torch's), and a warning it does not list still shows. Each runs as a user
runs it, in a fresh interpreter."""
import os
import subprocess
import sys
import warnings

from posnet_fairseq import tool_logging

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(REPO, "tests", "fixtures", "regression")
NOTICES = ("DeprecationWarning", "FutureWarning", "UserWarning", "deprecated")


def stderr_of(*argv):
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stderr


def test_posnet_generate_prints_no_library_notice():
    err = stderr_of("-m", "posnet_fairseq.cli.fairseq_wrappers", "generate", os.path.join(FIXTURE, "data-bin"),
                    "--path", os.path.join(FIXTURE, "transformer", "checkpoint.pt"), "--beam", "2",
                    "--max-len-b", "5", "--batch-size", "8", "--gen-subset", "valid")
    assert [line for line in err.splitlines() if any(n in line for n in NOTICES)] == []


def test_the_decoding_benchmark_prints_no_library_notice(tmp_path):
    err = stderr_of("-m", "posnet_fairseq.benchmark.decode_speed", "--size", "tiny", "--sentences", "4",
                    "--rounds", "1", "--lengths", "8", "--archs", "transformer", "--workdir", str(tmp_path))
    assert [line for line in err.splitlines() if any(n in line for n in NOTICES)] == []


def test_the_compare_analysis_step_prints_no_library_notice():
    # posnet-compare's analysis step (compare/mixing.py) runs fairseq's decoder teacher-forced over padded
    # sentences: its MultiheadAttention gives torch a bool padding mask and a float causal mask.
    err = stderr_of("-c", "import posnet_fairseq, sys; from posnet_fairseq.compare import mixing; "
                    "mixing.offset_profiles(sys.argv[1], sys.argv[2], sentences=8)",
                    os.path.join(FIXTURE, "transformer", "checkpoint.pt"), os.path.join(FIXTURE, "data-bin"))
    assert [line for line in err.splitlines() if any(n in line for n in NOTICES)] == []


def test_only_the_listed_notices_are_silenced():
    """The filters match the listed messages of their category, and nothing else."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        with tool_logging.fairseq_imported_quietly():
            pass
        warnings.simplefilter("always", append=True)  # shows what no notice filter before it drops
        warnings.warn("hydra.experimental.compose() is no longer experimental. Use hydra.compose()", UserWarning)
        warnings.warn("`torch.jit.script` is deprecated. Please switch to `torch.compile`", DeprecationWarning)
        warnings.warn("Support for mismatched key_padding_mask and attn_mask is deprecated. Use same type for both "
                      "instead.", UserWarning)
        warnings.warn("`torch.jit.script` is deprecated, said as a FutureWarning", FutureWarning)
        warnings.warn("some other notice", UserWarning)
    assert [(w.category, str(w.message)) for w in caught] == [
        (FutureWarning, "`torch.jit.script` is deprecated, said as a FutureWarning"),
        (UserWarning, "some other notice")]
