"""The flag declarations (posnet_fairseq/flags.py): typed options, their errors, aliases, defaults,
argparse and the docs tables; and the site table with its per-layer specs (posnet_fairseq/sites.py)."""
import argparse
import dataclasses

import pytest

from fairseq_testing import parse_train_args
from posnet_fairseq import flags
from posnet_fairseq.mixers import aan, gating, hc_gaussian, posnet
from posnet_fairseq.sites import SITE, layer_indices, per_layer


@pytest.fixture
def scratch_group():
    """Declares a throw-away group; the declarations are restored afterwards."""
    before = list(flags.GROUPS)
    yield lambda *flag_list: flags.declare("Scratch test flags", "scratch", *flag_list)
    flags.GROUPS[:] = before


def test_options_convert_values_to_the_declared_types():
    # Values as a hand-written Namespace or an edited checkpoint may hold them: strings, ints for floats.
    opts = posnet.FLAGS.options(argparse.Namespace(posnet_max_relative="3", posnet_precomputed=2.0))
    assert opts.posnet_max_relative == 3 and type(opts.posnet_max_relative) is int
    assert opts.posnet_precomputed == 2 and type(opts.posnet_precomputed) is int
    opts = aan.FLAGS.options(argparse.Namespace(aan_alpha=1, aan_patterns="ner, far", aan_ffn=1))
    assert opts.aan_alpha == 1.0 and type(opts.aan_alpha) is float
    assert opts.aan_patterns == ("ner", "far")  # a spec comes out parsed
    assert opts.aan_ffn is True


def test_options_fill_every_absent_flag_with_its_default_and_are_frozen():
    opts = hc_gaussian.FLAGS.options(argparse.Namespace(hc_sigma=2.5))
    assert (opts.hc_sigma, opts.hc_kernel, opts.hc_bias, opts.hc_weight_dropout, opts.learned_cross_heads) == \
        (2.5, "gaussian", False, 0.0, 1)
    assert opts.hc_encoder_offsets == "l,r" and opts.hc_cross_offsets == "l,c,r"
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.hc_sigma = 1.0
    # None defaults ("derived by the mechanism") stay None rather than failing the int type.
    assert aan.FLAGS.options(argparse.Namespace()).aan_ffn_dim is None


@pytest.mark.parametrize("group, attrs, message", [
    (posnet.FLAGS, {"posnet_position_norm": "rms"}, "--posnet-position-norm rms: choose from torch, apptek"),
    (gating.FLAGS, {"gating_gate_act": "relu"}, "--gating-gate-act relu: choose from none, gelu, sigmoid"),
    (posnet.FLAGS, {"posnet_max_relative": -1}, "--posnet-max-relative -1: must be an integer >= 0"),
    (posnet.FLAGS, {"posnet_max_relative": 2.5}, "--posnet-max-relative 2.5: must be an integer"),
    (posnet.FLAGS, {"posnet_max_relative": None}, "--posnet-max-relative None: "),
    (hc_gaussian.FLAGS, {"hc_sigma": "wide"}, "--hc-sigma wide: must be a number"),
    (hc_gaussian.FLAGS, {"hc_weight_dropout": 1.0}, r"--hc-weight-dropout 1.0: a dropout probability in \[0, 1\)"),
    (aan.FLAGS, {"aan_patterns": "ner,near"}, "--aan-patterns ner,near: give a comma-separated list of avg, ner"),
    (aan.FLAGS, {"aan_ffn": "yes"}, "--aan-ffn yes: a switch is on or off"),
])
def test_a_bad_value_names_the_flag_the_value_and_what_is_allowed(group, attrs, message):
    with pytest.raises(ValueError, match=message):
        group.options(argparse.Namespace(**attrs))


def test_an_alias_is_accepted_on_the_command_line_and_in_stored_arguments(scratch_group):
    group = scratch_group(flags.Flag("--scratch-window", 4, "a window", type=int, metavar="N",
                                     aliases=("--scratch-old-window",)))
    parser = argparse.ArgumentParser(argument_default=argparse.SUPPRESS)
    flags.add_args(parser)
    assert parser.parse_args(["--scratch-old-window", "7"]).scratch_window == 7
    assert parser.parse_args(["--scratch-window", "5"]).scratch_window == 5
    # A checkpoint written before the rename stores the old attribute.
    stored = argparse.Namespace(scratch_old_window=9)
    assert group.options(stored).scratch_window == 9
    flags.set_defaults(stored)
    assert stored.scratch_window == 9


def test_an_internal_flag_is_parsed_but_left_out_of_help_and_docs():
    args = parse_train_args(["--arch", "rposnet_transformer_tiny", "--posnet-precomputed", "12"])
    assert args.posnet_precomputed == 12
    parser = argparse.ArgumentParser()
    flags.add_args(parser)
    assert "--posnet-precomputed" not in parser.format_help()
    assert "--posnet-max-relative K" in parser.format_help()
    assert "posnet-precomputed" not in flags.markdown_table("posnet")


def test_the_help_gives_the_default_or_what_stands_for_it():
    parser = argparse.ArgumentParser()
    flags.add_args(parser)
    actions = {a.option_strings[0]: a for a in parser._actions if a.option_strings}
    assert actions["--posnet-max-relative"].help.endswith("(default: 16)")
    assert actions["--no-decoder-ffn"].help.endswith("(default: off)")
    assert actions["--aan-ffn-dim"].help.endswith("(default: --decoder-ffn-embed-dim)")


def test_every_declared_flag_reaches_fairseqs_parser_and_its_default_fills_args():
    from fairseq.models import ARCH_MODEL_REGISTRY

    parser = argparse.ArgumentParser()
    ARCH_MODEL_REGISTRY["posnet_transformer"].add_args(parser)
    known = {s for a in parser._actions for s in a.option_strings}
    declared = [flag for group in flags.GROUPS for flag in group.flags]
    assert {f.name for f in declared} <= known
    args = parse_train_args(["--arch", "posnet_transformer_tiny", "--posnet-max-relative", "3"])
    assert args.posnet_max_relative == 3
    assert (args.aan_alpha, args.hc_kernel, args.tisa_kernels, args.gating_norm) == (0.1, "gaussian", 5, "torch")
    assert args.length_ratio is None and args.no_encoder_ffn is False


def test_argparse_refuses_a_bad_choice_and_a_non_number():
    for argv in (["--posnet-position-norm", "rms"], ["--hc-sigma", "wide"]):
        with pytest.raises(SystemExit):
            parse_train_args(["--arch", "posnet_transformer_tiny", *argv])


def test_resolved_view_fills_defaults_checks_and_passes_other_fields_through():
    args = argparse.Namespace(decoder_layers=4, posnet_max_relative="5")
    view = flags.Resolved(args)
    assert view.posnet_max_relative == 5 and view.learned_cross_layers == "-1" and view.decoder_layers == 4
    assert not hasattr(args, "learned_cross_layers")  # a view: args are not changed
    with pytest.raises(ValueError, match="--aan-alpha 0.0: must be a positive number"):
        flags.Resolved(argparse.Namespace(aan_alpha=0.0)).aan_alpha


def test_a_switch_is_off_by_default_and_on_when_given():
    assert parse_train_args(["--arch", "posnet_transformer_tiny"]).no_decoder_ffn is False
    assert parse_train_args(["--arch", "posnet_transformer_tiny", "--no-decoder-ffn"]).no_decoder_ffn is True


def test_a_flag_cannot_be_declared_twice(scratch_group):
    with pytest.raises(ValueError, match="--posnet-max-relative is declared twice"):
        scratch_group(flags.Flag("--posnet-max-relative", 1, "x", type=int))


def test_per_layer_spec_broadcasts_checks_and_converts():
    assert per_layer("--x", "on", 3) == ["on", "on", "on"]
    assert per_layer("--x", "1, 2,3", 3, parse=int) == [1, 2, 3]
    assert per_layer("--x", "a;b", 2, sep=";") == ["a", "b"]
    with pytest.raises(ValueError, match=r"--x 1,2: gives 2 per-layer values but the model has 3 layers"):
        per_layer("--x", "1,2", 3)
    with pytest.raises(ValueError, match=r"--x on,maybe: 'maybe' is not one of on, off"):
        per_layer("--x", "on,maybe", 2, choices=("on", "off"))
    with pytest.raises(ValueError, match=r"--x 1,b: invalid literal"):
        per_layer("--x", "1,b", 2, parse=int)


def test_layer_indices_count_from_the_end():
    assert layer_indices("--learned-cross-layers", "-1,0", 6) == [0, 5]
    with pytest.raises(ValueError, match="--learned-cross-layers 6: layer 6 does not exist in a decoder of 6"):
        layer_indices("--learned-cross-layers", "6", 6)


def test_site_flags_are_derived_from_one_record():
    cross = SITE["cross"]
    assert (cross.mixer_flag, cross.gating_flag, cross.hc_offsets_flag, cross.layers_attr) == \
        ("--cross-mixer", "--cross-gating", "--hc-cross-offsets", "decoder_layers")
    assert (cross.side, cross.causal, cross.cross) == ("decoder", False, True)
    enc = SITE["encoder_self"]
    assert (enc.mixer_flag, enc.learned_pos_flag, enc.max_positions_flag, enc.causal) == \
        ("--encoder-self-mixer", "--encoder-learned-pos", "--max-source-positions", False)
    assert SITE["decoder_self"].causal and not SITE["decoder_self"].cross


def test_markdown_table_has_one_row_per_flag_with_its_default():
    table = flags.markdown_table("posnet")
    assert "| `--posnet-max-relative K` | 16 |" in table
    assert "| `--posnet-position-norm {torch,apptek}` | torch |" in table
    assert "| `--relative-values` | off |" in table
    assert table.count("`--posnet-max-relative ") == 1
    with pytest.raises(ValueError, match="no flag table markers"):
        flags.with_table("no markers here", "posnet", "docs/posnet.md")
