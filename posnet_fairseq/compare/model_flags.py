"""The models of a ``posnet-compare`` run: their names, and their flags checked before any data is prepared.

A model is named by its architecture (``--archs rope_transformer_tiny``), or by its architecture and a
label, ``ARCH+LABEL`` (``rope_transformer_tiny+randomized``): the same architecture once more, under
another name, to be trained with other flags (``--arch-flags rope_transformer_tiny+randomized=...``).
The name is the model's everywhere in the run (its checkpoints, translations, rows); only fairseq is
given the architecture (:func:`architecture`).

Each model is built as fairseq-train would build it (its architecture and
flags, the plugin's own flag checks included) on a dictionary of a few
symbols, so that a bad flag is told in seconds, for every model at once,
instead of after the data and as a failed training.
"""
import contextlib
import io
import re

_SYMBOLS = 8
VARIANT = "+"
# A label names files (checkpoints/NAME/, gen/NAME.out) and must not hold the seeds' ".seedS" suffix.
_LABEL = re.compile(r"^[A-Za-z0-9_-]+$")


def architecture(model):
    """The fairseq architecture of a model's name: ARCH of ``ARCH+LABEL``, else the name itself."""
    return model.split(VARIANT, 1)[0]


def refused_name(model):
    """Why a model's name is refused (a bad label), or None."""
    arch, sep, label = model.partition(VARIANT)
    if sep and not _LABEL.match(label):
        return (f"{model}: the label after {VARIANT!r} must be letters, digits, '_' or '-' (ARCH{VARIANT}LABEL, "
                f"e.g. {arch}{VARIANT}shape)")
    return None


def _argparse_error(text, status):
    """The 'error: ...' line argparse printed before exiting, else a plain description."""
    lines = [line.split("error: ", 1)[1] for line in text.splitlines() if "error: " in line]
    return lines[-1] if lines else f"fairseq's parser exited with status {status}"


# The settings a model's --model-overrides may change at translation that fairseq's validation in training measures
# too: set there only, the model is validated (--patience, the best checkpoints averaged) as it is not translated.
VALIDATED_SETTINGS = {"randomized_test_positions": "--randomized-test-positions"}


def _overrides_text(generate_flags):
    import argparse

    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--model-overrides")
    return parser.parse_known_args(generate_flags)[0].model_overrides


def _overridden(generate_flags):
    """The RoPE scaling flags that ``generate_flags``' --model-overrides sets, as command-line flags: the model is
    built with them as well, so that a scaling on a model without RoPE is refused here."""
    from .. import troubleshooting
    from ..mixers.rope_scaling import FLAGS

    text = _overrides_text(generate_flags)
    problem = troubleshooting.architecture_override(text)
    if problem:
        raise ValueError(problem)
    declared = {f.dest: f.name for f in FLAGS.flags}  # none is a switch: each takes a value
    return [a for key, value in troubleshooting.model_overrides(text).items() if key in declared
            for a in (declared[key], str(value))]


def validated_otherwise(flags, generate_flags):
    """{model: a note for the run's log} for each model of ``flags`` whose ``generate_flags``' --model-overrides
    set a setting of :data:`VALIDATED_SETTINGS` that its training flags do not set to the same value."""
    from .. import troubleshooting

    notes = {}
    for model, argv in flags.items():
        overrides = troubleshooting.model_overrides(_overrides_text(generate_flags.get(model, [])))
        for key, flag in VALIDATED_SETTINGS.items():
            trained = troubleshooting.option(argv, flag)
            if key in overrides and str(overrides[key]) != trained:
                notes[model] = (f"{model} is translated with {key} {overrides[key]!r} (--arch-generate-flags) but "
                                "validated in training with another value (--patience and the best checkpoints go by "
                                f"that loss); pass {flag} {overrides[key]} in --arch-flags to validate it as it is "
                                "translated")
    return notes


def _build(argv, vocab):
    """The model fairseq-train builds from ``argv``, on ``vocab`` and without data (a placeholder length ratio
    where it needs one: :func:`posnet_fairseq.benchmark.training_step.build_without_data`)."""
    from ..benchmark.training_step import build_without_data

    return build_without_data(argv, vocab, seed=1)[0]


def check(flags, generate_flags=None):
    """({arch: why its flags are refused}, {arch: (source, target) positions its model takes}) for
    ``flags`` ({model: its fairseq flags}; a model's name, see :func:`architecture`), each model built with
    its ``generate_flags``' --model-overrides too."""
    from ..benchmark.training_step import dictionary

    vocab = dictionary(_SYMBOLS)
    errors, limits = {}, {}
    for arch, argv in flags.items():
        printed = io.StringIO()
        try:
            overridden = _overridden((generate_flags or {}).get(arch, []))
            with contextlib.redirect_stderr(printed), contextlib.redirect_stdout(printed):
                model = _build(["--arch", architecture(arch), *argv, *overridden], vocab)
        except SystemExit as err:  # argparse: an unknown flag or a bad value
            errors[arch] = _argparse_error(printed.getvalue(), err.code)
        except (ValueError, TypeError, AssertionError) as err:  # the plugin's and fairseq's own checks
            errors[arch] = str(err) or type(err).__name__
        else:
            source, target = model.max_positions()
            limits[arch] = (int(source), int(target))
    return errors, limits
