"""Every model's flags checked before a ``posnet-compare`` run prepares any data.

Each model is built as fairseq-train would build it (its architecture and
flags, the plugin's own flag checks included) on a dictionary of a few
symbols, so that a bad flag is told in seconds, for every model at once,
instead of after the data and as a failed training.
"""
import contextlib
import io

_SYMBOLS = 8


def _argparse_error(text, status):
    """The 'error: ...' line argparse printed before exiting, else a plain description."""
    lines = [line.split("error: ", 1)[1] for line in text.splitlines() if "error: " in line]
    return lines[-1] if lines else f"fairseq's parser exited with status {status}"


def check(flags):
    """({arch: why its flags are refused}, {arch: (source, target) positions its model takes}) for
    ``flags`` ({arch: its fairseq flags})."""
    from ..benchmark.training_step import build_model, dictionary

    vocab = dictionary(_SYMBOLS)
    errors, limits = {}, {}
    for arch, argv in flags.items():
        printed = io.StringIO()
        try:
            with contextlib.redirect_stderr(printed), contextlib.redirect_stdout(printed):
                model, _ = build_model(["--arch", arch, *argv], vocab, seed=1)
        except SystemExit as err:  # argparse: an unknown flag or a bad value
            errors[arch] = _argparse_error(printed.getvalue(), err.code)
        except (ValueError, TypeError, AssertionError) as err:  # the plugin's and fairseq's own checks
            errors[arch] = str(err) or type(err).__name__
        else:
            source, target = model.max_positions()
            limits[arch] = (int(source), int(target))
    return errors, limits
