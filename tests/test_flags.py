"""The flag declarations (posnet_fairseq/flags.py) and the site table (posnet_fairseq/sites.py)."""
import argparse

import pytest

from fairseq_testing import parse_train_args
from posnet_fairseq import flags
from posnet_fairseq.sites import SITE, layer_indices, per_layer

DECLARED = [flag for group in flags.GROUPS for flag in group.flags]


def test_every_declared_flag_reaches_fairseqs_parser_with_its_default_in_the_help():
    from fairseq.models import ARCH_MODEL_REGISTRY

    parser = argparse.ArgumentParser()
    ARCH_MODEL_REGISTRY["posnet_transformer"].add_args(parser)
    actions = {a.option_strings[0]: a for a in parser._actions if a.option_strings}
    for flag in DECLARED:
        assert flag.name in actions, flag.name
        assert f"(default: {flag.default_text})" in actions[flag.name].help


def test_defaults_come_from_the_declaration_and_the_command_line_wins():
    args = parse_train_args(["--arch", "posnet_transformer_tiny", "--posnet-max-relative", "3"])
    assert args.posnet_max_relative == 3
    for flag in DECLARED:
        if flag.name != "--posnet-max-relative" and flag.dest not in ("encoder_self_mixer", "decoder_self_mixer",
                                                                     "cross_mixer"):
            assert getattr(args, flag.dest) == flag.default, flag.name


def test_a_switch_is_off_by_default_and_on_when_given():
    assert parse_train_args(["--arch", "posnet_transformer_tiny"]).no_decoder_ffn is False
    assert parse_train_args(["--arch", "posnet_transformer_tiny", "--no-decoder-ffn"]).no_decoder_ffn is True


def test_a_flag_cannot_be_declared_twice():
    before = list(flags.GROUPS)
    try:
        with pytest.raises(ValueError, match="--posnet-max-relative is declared twice"):
            flags.declare("again", "posnet", flags.Flag("--posnet-max-relative", 1, "x", type=int))
    finally:
        flags.GROUPS[:] = before


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
    enc = SITE["encoder_self"]
    assert (enc.mixer_flag, enc.learned_pos_flag, enc.max_positions_flag, enc.causal) == \
        ("--encoder-self-mixer", "--encoder-learned-pos", "--max-source-positions", False)
    assert SITE["decoder_self"].causal


def test_markdown_table_lists_every_flag_of_a_page_once():
    table = flags.markdown_table("posnet")
    names = [f.name for g in flags.GROUPS if g.page == "posnet" for f in g.flags]
    assert names and all(table.count(f"`{name} ") + table.count(f"`{name}`") == 1 for name in names)
    with pytest.raises(ValueError, match="no flag table markers"):
        flags.with_table("no markers here", "posnet", "docs/posnet.md")
