"""The scoring and cost steps produce frozen, typed records whose serialised form is quality.json / cost.json.

The run whose whole record is shipped (``docs/compare/verdict-bible/run.tar.xz``) holds both files as the code
before the records wrote them: each is read into its record and written again byte for byte, and the record
read from that is the same record (a run made before resumes with its files). The scoring step's producers
(:func:`posnet_fairseq.compare.quality.score`, ``merge``, ``add_joined_buckets``) give records that survive the
same round trip, and no record can be changed in place.
"""
import dataclasses
import json
import tarfile

import pytest

from posnet_fairseq.compare import quality
from posnet_fairseq.compare.records import Cost, Quality

from test_compare_shipped import WHOLE


def _shipped(name):
    with tarfile.open(WHOLE) as tar:
        return tar.extractfile(f"verdict-bible/{name}").read().decode()


def _saved(record):
    """The bytes steps.save_json writes for ``record``."""
    return json.dumps(record.stored(), indent=1)


@pytest.mark.parametrize("name, record", [("quality.json", Quality), ("cost.json", Cost)])
def test_a_shipped_runs_file_is_its_records_serialised_form(name, record):
    text = _shipped(name)
    read = record.read(json.loads(text))
    assert _saved(read) == text
    assert record.read(json.loads(_saved(read))) == read


def test_the_shipped_records_hold_what_the_report_reads():
    q, c = Quality.read(json.loads(_shipped("quality.json"))), Cost.read(json.loads(_shipped("cost.json")))
    base = q.baseline
    assert base == "posnet_transformer_tiny" and q.systems[base].bleu.p is None
    other = q.systems["rposnet_transformer_tiny"].bleu
    assert (other.p_value, other.p_value_worse, other.p, other.direction) == (0.979, 0.021, 0.021, "worse")
    assert q.seeds == (1, 2, 3) and q.concatenated["k"] == 4 and q.buckets[-1].concatenated == 4
    assert c.parameters["rposnet_transformer_tiny"].precompute_length == 128
    assert c.steps[base].tokens == 2048 and c.settings["decode_lengths"] == (30, 80, 200)
    assert c.settings["archs"][0] == base and c.precompute_length == "128" and c.devices


def test_records_cannot_be_changed_in_place():
    q = Quality.read(json.loads(_shipped("quality.json")))
    with pytest.raises(dataclasses.FrozenInstanceError):
        q.samples = 1
    with pytest.raises(TypeError):
        q.systems["x"] = q.systems[q.baseline]
    with pytest.raises(TypeError):
        q.verdict["rposnet_transformer_tiny"]["in range"] = None
    c = Cost.read(json.loads(_shipped("cost.json")))
    with pytest.raises(TypeError):
        c.steps[q.baseline].measured["tokens"] = 0


def _toy(archs):
    """Each model's translations of eight test sentences (a third of them spoilt, by model), the references,
    and their lengths (words: the source's, the model tokens' on both sides)."""
    refs = ["a b c", "a b c d", "b c d e f", "c d e f g h", "a a b b c c d", "d e f g h i j k", "a b", "e f g"]
    lengths = [len(r.split()) for r in refs]
    outputs = {arch: ([r if (i + n) % 3 else r.replace("a", "z") for i, r in enumerate(refs)], [1] if n else [])
               for n, arch in enumerate(archs)}
    return outputs, refs, lengths, lengths, lengths


def test_the_scoring_steps_records_round_trip():
    archs = ["base", "other", "short"]
    limits = {"base": (64, 64), "other": (64, 64), "short": (4, 4)}
    outputs, refs, lengths, src, tgt = _toy(archs)
    buckets = [(1, 3, False), (4, 5, False), (6, 8, False)]
    scored = quality.score(archs, outputs, refs, lengths, src, tgt, limits, buckets, 5, force=True, samples=20)
    assert isinstance(scored, Quality) and scored.baseline == "base" and scored.systems["other"].bleu.p_value >= 0
    assert scored.buckets[2].scores["short"].beyond == 4 and scored.buckets[2].beyond_training
    joined = {"k": 2, "runs": 4, "tail": 0, "examples": 4, "too_long": 0, "lengths": [6, 7, 9, 12]}
    parts = ({a: ([" ".join(refs[i:i + 2]) for i in range(0, 8, 2)], []) for a in archs},
             [" ".join(refs[i:i + 2]) for i in range(0, 8, 2)], joined["lengths"], joined["lengths"])
    with_joined = quality.add_joined_buckets(scored, joined, archs, parts, limits, 5, 1, force=True)
    assert with_joined.concatenated["within_training"] == 0 and with_joined.buckets[-1].concatenated == 2
    assert scored.concatenated is None and len(scored.buckets) == 3  # the record given is left as it was
    renamed = {f"{a}.seed2": o for a, o in outputs.items()}
    second = quality.score(list(renamed), renamed, refs, lengths, src, tgt,
                           {f"{a}.seed2": v for a, v in limits.items()}, buckets, 5, force=True, samples=20)
    merged = quality.merge([scored, second])
    assert list(merged.systems) == [*archs, *renamed] and list(merged.buckets[0].scores) == [*archs, *renamed]
    for record in (scored, with_joined, merged):
        assert Quality.read(json.loads(_saved(record))) == record
