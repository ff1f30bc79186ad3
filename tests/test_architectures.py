"""The named architectures: the full list of names, and what each one resolves to.

The names come from the mechanisms' family declarations (families.py). Users'
commands and checkpoints name architectures, so the list is pinned by the
snapshot ``architectures_resolved.json``: removing or renaming one, or adding
one, must be a deliberate rewrite of it. It pins, for every
architecture (and a few with flags that interact with a preset) the plugin's
flags that differ from their declared default and the size fields that differ
from ``posnet_transformer_base``. After a deliberate change, rewrite it with
``python tests/test_architectures.py --write-fixture`` and review the diff.
"""
import json
import os
import sys

import pytest
import torch
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_INV_REGISTRY

from fairseq_testing import build_model, parse_train_args, train_and_generate, write_synthetic_data_bin
from posnet_fairseq import families, flags
from posnet_fairseq.models.architectures import SIZES

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "architectures_resolved.json")

# The names the mechanisms declare (posnet_fairseq/families.py), generated; the snapshot pins them.
NAMES = sorted(preset.name for preset in families.presets())

# Flags that a preset reads or derives from: each case pins the interaction.
CASES = [
    "rposnet_transformer_base --encoder-self-mixer mha",  # gating follows the mixers
    "rposnet_transformer_base --decoder-self-mixer mha,mha,mha,rposnet,rposnet,rposnet",
    "rposnet_transformer_base --cross-mixer rposnet --encoder-self-gating off",
    "aposnet_transformer_big --posnet-max-relative 4",
    "hc_gaussian_shx --decoder-layers 4",  # SH-X: cross spec per decoder layer
    "hc_gaussian_shx_tiny --learned-cross-layers 0,-1",
    "hc_gaussian_shx_iwslt --cross-mixer mha",
    "linearnet_transformer_tiny --linearnet-max-length 64",  # the preset's limit follows the table
    "linearnet_transformer_tiny --max-source-positions 100",
    "aan_plus_ner_deep --aan-patterns ner,far --encoder-layers 6",
    "shaw_transformer_big --relative-max-distance 4 --dropout 0.2",
    "tisa_nope_transformer_small --tisa-kernels 0",
]

# fairseq's size and position fields that presets set.
SIZE_FIELDS = [
    f"{side}_{field}" for side in ("encoder", "decoder")
    for field in ("embed_dim", "ffn_embed_dim", "attention_heads", "layers", "learned_pos", "normalize_before")
] + ["dropout", "attention_dropout", "activation_dropout", "share_decoder_input_output_embed",
     "share_all_embeddings", "no_token_positional_embeddings", "max_source_positions", "max_target_positions"]
UNSET = "(unset)"


def _sizes(args):
    return {f: getattr(args, f, UNSET) for f in SIZE_FIELDS}


def resolved(command, reference):
    """What ``--arch`` (and the case's flags) resolve to, as a diff against the defaults and ``reference``."""
    arch, *extra = command.split()
    args = parse_train_args(["--arch", arch, *extra])
    out = {f.dest: getattr(args, f.dest) for g in flags.GROUPS for f in g.flags if getattr(args, f.dest) != f.default}
    out.update({f: v for f, v in _sizes(args).items() if v != reference[f]})
    return dict(sorted(out.items()))


def reference_sizes():
    return _sizes(parse_train_args(["--arch", "posnet_transformer_base"]))


def current():
    reference = reference_sizes()
    return {
        "reference (posnet_transformer_base)": reference,
        "architectures": {name: resolved(name, reference) for name in NAMES},
        "with flags": {case: resolved(case, reference) for case in CASES},
    }


@pytest.fixture(scope="module")
def pinned():
    with open(FIXTURE) as f:
        return json.load(f)


def test_the_registered_names_are_the_declared_and_the_pinned_ones(pinned):
    assert sorted(ARCH_MODEL_INV_REGISTRY["posnet_transformer"]) == NAMES
    assert NAMES == sorted(pinned["architectures"]), (
        "the declared names differ from the snapshot: after a deliberate change, "
        "run python tests/test_architectures.py --write-fixture and review the diff")


def test_a_name_ends_with_its_size():
    for name in NAMES:
        suffix = name.rsplit("_", 1)[-1]
        assert ARCH_CONFIG_REGISTRY[name].size.name == (suffix if suffix in SIZES else "base"), name


def test_base_sizes_are_unchanged(pinned):
    assert reference_sizes() == pinned["reference (posnet_transformer_base)"]


@pytest.mark.parametrize("name", NAMES)
def test_every_architecture_resolves_as_pinned(name, pinned):
    assert resolved(name, pinned["reference (posnet_transformer_base)"]) == pinned["architectures"][name]


@pytest.mark.parametrize("case", CASES)
def test_flags_interact_with_presets_as_pinned(case, pinned):
    assert resolved(case, pinned["reference (posnet_transformer_base)"]) == pinned["with flags"][case]


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory):
    return write_synthetic_data_bin(str(tmp_path_factory.mktemp("synthetic")), train=60, valid=5, test=5)


@pytest.mark.parametrize("name", ["linearnet_transformer_tiny", "glinearnet_transformer_tiny"])
def test_linearnet_presets_train_with_default_flags(name, data_bin, tmp_path):
    """No size or position flag at all: the preset's 128 positions apply, not fairseq's 1024."""
    checkpoint, out = train_and_generate(data_bin, str(tmp_path / "ckpt"), name, dims=())
    assert len([line for line in out.splitlines() if line.startswith("H-")]) == 5, out[-2000:]
    cfg = torch.load(checkpoint, weights_only=True)["cfg"]
    assert (cfg["model"].max_source_positions, cfg["model"].max_target_positions) == (128, 128)
    assert (cfg["task"]["max_source_positions"], cfg["task"]["max_target_positions"]) == (128, 128)


def test_an_explicit_position_flag_wins_over_the_linearnet_preset():
    model, _ = build_model(["--max-source-positions", "64"], arch="linearnet_transformer_tiny", dims=())
    assert model.max_positions() == (64, 128)
    with pytest.raises(ValueError, match="--max-target-positions 256 exceeds the 128 positions"):
        build_model(["--max-target-positions", "256"], arch="glinearnet_transformer_tiny", dims=())


def _write_fixture():
    data = current()
    # One line per architecture: a reviewable diff when a preset changes.
    reference = json.dumps(data["reference (posnet_transformer_base)"])
    lines = ["{", f'  "reference (posnet_transformer_base)": {reference},']
    for section in ("architectures", "with flags"):
        rows = [f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in data[section].items()]
        lines += [f"  {json.dumps(section)}: {{", ",\n".join(rows), "  }" + ("," if section == "architectures" else "")]
    lines.append("}")
    with open(FIXTURE, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write-fixture"]:
        sys.exit(f"usage: python {sys.argv[0]} --write-fixture")
    _write_fixture()
