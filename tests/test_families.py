"""posnet_fairseq/families.py: the names a family declares, its errors, the benchmark's order, and the rule
that every mixer's module declares its mechanism."""
import pytest

from posnet_fairseq import families
from posnet_fairseq.benchmark import ALIASES, FAMILIES
from posnet_fairseq.mixers.registry import MIXERS
from posnet_fairseq.models import architectures


def family(prefix="x_transformer", sizes=None, **kwargs):
    return families.Family(prefix, "an example", {"encoder_self_mixer": "mha"},
                           sizes or {"tiny": families.TESTS, "base": "a table"}, **{"ctranslate2": families.CONVERTS,
                                                                                   **kwargs})


def test_names_are_prefix_and_size_with_the_bare_base_forms():
    assert [p.name for p in family().presets()] == ["x_transformer_tiny", "x_transformer_base"]
    assert [p.name for p in family("aan_x", unsuffixed_base=True).presets()] == ["aan_x_tiny", "aan_x"]
    alias = list(family(bare_alias=True).presets())
    assert [(p.name, p.size, p.reproduces) for p in alias[:1]] == [("x_transformer", "base", "= x_transformer_base")]
    assert [p.name for p in alias[1:]] == ["x_transformer_tiny", "x_transformer_base"]


def test_a_size_setting_overrides_the_family_setting_at_that_size_only():
    f = family(at_size={"base": {"encoder_self_mixer": "none"}})
    assert f.settings_at("base") == {"encoder_self_mixer": "none"}
    assert f.settings_at("tiny") == {"encoder_self_mixer": "mha"}


@pytest.mark.parametrize("kwargs, message", [
    ({"benchmark": "fastest"}, "benchmark 'fastest' is not one of"),
    ({"unsuffixed_base": True, "sizes": {"tiny": families.TESTS}}, "a bare name needs the base size"),
    ({"at_size": {"big": {"a": 1}}}, r"at_size names sizes it does not come in: \['big'\]"),
])
def test_a_wrong_family_is_refused_naming_it(kwargs, message):
    with pytest.raises(ValueError, match=f"family x_transformer: {message}"):
        family(**kwargs)


def test_a_name_declared_twice_is_refused_and_nothing_is_registered():
    count = len(families.MECHANISMS)
    with pytest.raises(ValueError, match="example: preset rope_transformer_tiny is declared twice"):
        families.declare("example", "Example", "position-schemes", family("rope_transformer"))
    assert len(families.MECHANISMS) == count


def test_an_unknown_size_is_refused_naming_the_family_and_the_sizes():
    preset = next(family(sizes={"huge": "none"}).presets())
    with pytest.raises(ValueError, match="family x_transformer: no size 'huge'; sizes are tiny, small, base"):
        architectures._architecture(preset)


def test_the_benchmark_lists_the_baseline_then_the_ceiling_then_one_family_per_mechanism():
    assert FAMILIES[:2] == ("transformer", "transformer_nosa") and ALIASES == {"transformer": "posnet_transformer"}
    declared = [f for m in families.MECHANISMS for f in m.families if f.benchmark == "mechanism"]
    assert list(FAMILIES[2:]) == [f.prefix for f in declared]


def test_every_mixer_module_declares_its_mechanism():
    declared = {m.module for m in families.MECHANISMS}
    assert {entry.module for entry in MIXERS.values()} == declared
