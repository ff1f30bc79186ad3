"""posnet_fairseq/evaluation/meteor.py: nltk's METEOR on sentences worked out by hand, and its absence said, not failed."""
import sys

import pytest

from posnet_fairseq.evaluation import meteor


def test_meteor_on_known_sentences(capsys):
    """METEOR by hand: 'a cat sat' / 'the cat sat down': 2 matches in 1 chunk, P = 2/3, R = 1/2,
    F = PR / (0.9 P + 0.1 R) = 0.51282, penalty 0.5 (1/2)^3 = 0.0625 -> 48.08; an identical 6-word
    sentence: 1 - 0.5 (1/6)^3 -> 99.77; German 'die Häuser stehen' / 'das Haus steht': one stem match
    (Häuser, Haus) in 1 chunk, F = 1/3, penalty 0.5 -> 16.67. nltk is a pinned dependency of the project, so
    this runs wherever the tests run; its absence is the next test's case (said, not failed)."""
    res = meteor.meteor(["a cat sat", "the cat sat on the mat"], ["the cat sat down", "the cat sat on the mat"], "en")
    assert res["scores"] == [pytest.approx(48.0769, abs=1e-4), pytest.approx(99.7685, abs=1e-4)]
    assert res["score"] == 73.92 and "not meteor-1.5" in res["signature"]
    res = meteor.meteor(["die Häuser stehen"], ["das Haus steht"], "de")
    assert res["scores"] == [pytest.approx(100 / 6)] and "snowball-german" in res["signature"]


def test_meteor_unavailable_is_said_not_failed(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "nltk", None)  # as if nltk were not installed
    monkeypatch.setitem(sys.modules, "nltk.stem.snowball", None)
    res = meteor.meteor(["a b"], ["a b"], "de")
    assert not res["available"] and res["reason"].startswith("nltk is not installed (pip install nltk)")
    assert "METEOR: unavailable: nltk is not installed" in capsys.readouterr().out
    res = meteor.meteor(["a b"], ["a b"], "zh")
    assert not res["available"] and "no Snowball stemmer for target language 'zh'" in res["reason"]
