"""docs/adding-a-mixer.md, followed: its mixer file is written into the package and registered, its
preset is registered and built, and the model passes the mixer contract checks; everything is
unregistered afterwards, so the rest of the suite sees the package as it is."""
import argparse
import importlib.util
import os
import re
import sys

import pytest
import torch
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_INV_REGISTRY, ARCH_MODEL_REGISTRY, \
    register_model_architecture

from fairseq_testing import (
    build_model, check_beam_reordering, check_finite_at_longest_length, check_incremental_equals_teacher_forced,
    check_padding_invariance,
)
from posnet_fairseq import flags
from posnet_fairseq.evaluation.tables import TABLES
from posnet_fairseq.mixers.gating import GatedMixer
from posnet_fairseq.mixers.registry import MIXERS
from posnet_fairseq.models import architectures

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "adding-a-mixer.md")
ATOL = 1e-5


def code_block(first_line):
    """The python code block of the page that starts with ``first_line`` (a path comment)."""
    with open(DOC) as f:
        blocks = re.findall(r"^```python\n(.*?)^```", f.read(), flags=re.S | re.M)
    matching = [b for b in blocks if b.startswith(first_line + "\n")]
    assert len(matching) == 1, f"docs/adding-a-mixer.md has {len(matching)} code blocks starting {first_line!r}"
    return matching[0]


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """The page's mixer module (registered) and preset (registered with fairseq); both removed afterwards."""
    path = tmp_path_factory.mktemp("mixer") / "window_mean.py"
    path.write_text(code_block("# posnet_fairseq/mixers/window_mean.py"))
    groups, name = list(flags.GROUPS), "posnet_fairseq.mixers.window_mean"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    namespace = dict(vars(architectures))
    try:
        spec.loader.exec_module(module)
        exec(code_block("# posnet_fairseq/models/architectures.py"), namespace)
        preset = namespace["PRESET"]
        register_model_architecture("posnet_transformer", preset.name)(preset)
        yield module, preset
    finally:
        MIXERS.pop("window_mean", None)
        flags.GROUPS[:] = groups
        sys.modules.pop(name, None)
        if "PRESET" in namespace:
            arch = namespace["PRESET"].name
            ARCH_MODEL_REGISTRY.pop(arch, None)
            ARCH_CONFIG_REGISTRY.pop(arch, None)
            if arch in ARCH_MODEL_INV_REGISTRY["posnet_transformer"]:
                ARCH_MODEL_INV_REGISTRY["posnet_transformer"].remove(arch)


def test_the_mixer_registers_at_its_sites_with_its_variant(example):
    module, _ = example
    entry = MIXERS["window_mean"]
    assert entry.sites == {"encoder_self", "decoder_self"} and entry.variants == {"k0": {"window_mean_size": 0}}
    assert entry.build == module.WindowMean.build


@pytest.mark.parametrize("extra", [[], ["--window-mean-size", "0"], ["--decoder-self-gating", "on"]],
                         ids=["preset", "k0", "gated"])
def test_the_preset_builds_the_mixer_and_passes_the_contract(example, extra):
    module, preset = example
    model, task = build_model(extra, arch=preset.name)
    d = task.source_dictionary
    for layers in (model.encoder.layers, model.decoder.layers):
        mixers = [m.mixer if isinstance(m, GatedMixer) else m for m in (layer.self_attn for layer in layers)]
        assert all(isinstance(m, module.WindowMean) for m in mixers)
    assert mixers[0].window == (0 if extra[:1] == ["--window-mean-size"] else 2) and mixers[0].causal
    assert isinstance(model.decoder.layers[0].self_attn, GatedMixer) == (extra[:1] == ["--decoder-self-gating"])
    check_padding_invariance(model, d, ATOL)
    check_incremental_equals_teacher_forced(model, d, ATOL)
    check_beam_reordering(model, d, ATOL)
    check_finite_at_longest_length(model, d, "decoder_self")


def test_the_mixer_computes_the_windowed_mean(example):
    module, _ = example
    mixer = module.WindowMean(4, 2, window=1, causal=False).eval()
    x = torch.randn(5, 1, 4, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        out = mixer(x, x, x)[0]
        v = mixer.v_proj(x)
        expected = torch.stack([v[max(n - 1, 0): n + 2].mean(dim=0) for n in range(5)])
        torch.testing.assert_close(out, mixer.out_proj(expected), atol=1e-6, rtol=0)


def test_its_flag_is_typed_checked_in_the_help_and_in_a_generated_table(example):
    module, _ = example
    with pytest.raises(ValueError, match="--window-mean-size -1: must be an integer >= 0"):
        build_model(["--window-mean-size", "-1"], arch=example[1].name)
    assert module.FLAGS.options(argparse.Namespace()).window_mean_size == 2
    table = flags.markdown_table("adding-a-mixer")
    assert "| `--window-mean-size K` | 2 | window_mean: keys within K positions of the query are averaged |" in table


def test_the_table_row_fits_the_paper_tables():
    row = {}
    exec(code_block("# posnet_fairseq/evaluation/tables.py"), row)
    key, label = row["ROW"]
    assert key == "window_mean" and label
    assert "posnet-table2" in TABLES and all(len(r) == 2 for r in TABLES["posnet-table2"].rows)
