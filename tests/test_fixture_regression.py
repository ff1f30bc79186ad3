"""Checkpoints trained by an earlier commit decode as they did then.

``tests/fixtures/regression/<family>/`` holds a tiny checkpoint of one
mechanism family and the H- and P- lines that fairseq-generate printed for it
when it was made (see tests/fixtures/make_regression_fixtures.py and
regression/PROVENANCE). Loading a checkpoint reruns its architecture preset
and rebuilds every mixer from the stored flags, so a change to flag
declarations, presets, site tables or module paths that alters what a trained
model computes -- or stops it from loading -- fails here.

Hypotheses must be identical. Scores are compared with a tolerance far below
what a real change moves: decoding is CPU fp32 and deterministic, but the same
code on another thread count (and so, presumably, on another CPU's kernels)
rounds differently in the last bit -- 2 threads instead of conftest's 1 move
some H- scores by 5e-7 -- while scaling the attention energies of the PosNet
or the relative-attention mixers by 1.001 moves them by 3e-5 to 2e-4.
"""
import os
import sys

import pytest
import torch

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
sys.path.insert(0, FIXTURES)

import make_regression_fixtures as recipe  # noqa: E402

FAMILIES = sorted(name for name in os.listdir(recipe.FIXTURE_DIR)
                  if os.path.isfile(os.path.join(recipe.FIXTURE_DIR, name, recipe.CHECKPOINT)))


# H- scores are printed in full float precision: a few ulps of slack (see above).
H_SCORE_TOLERANCE = 1e-5
# P- scores are printed with 4 decimals, so last-bit noise can flip the last
# digit: one unit of it, not two.
P_SCORE_TOLERANCE = 1.5e-4


def same_line(got, expected):
    """Whether two H- or P- lines agree: the same id and tokens, scores within tolerance."""
    got_fields, expected_fields = got.split("\t"), expected.split("\t")
    if got_fields[0] != expected_fields[0] or len(got_fields) != len(expected_fields):
        return False
    if expected.startswith("H-"):
        return got_fields[2] == expected_fields[2] and \
            abs(float(got_fields[1]) - float(expected_fields[1])) <= H_SCORE_TOLERANCE
    got_scores, expected_scores = got_fields[1].split(), expected_fields[1].split()
    return len(got_scores) == len(expected_scores) and \
        all(abs(float(g) - float(e)) <= P_SCORE_TOLERANCE for g, e in zip(got_scores, expected_scores))


def test_every_family_of_the_recipe_has_its_fixture():
    assert FAMILIES == sorted(recipe.FAMILIES)


@pytest.mark.parametrize("family", FAMILIES)
def test_checkpoint_decodes_as_when_it_was_made(family):
    family_dir = os.path.join(recipe.FIXTURE_DIR, family)
    checkpoint = os.path.join(family_dir, recipe.CHECKPOINT)
    # The safe loader, as fairseq's checkpoint_utils uses it with the plugin's allow-list.
    state = torch.load(checkpoint, weights_only=True)
    assert state["cfg"]["model"].arch == recipe.FAMILIES[family][0]

    with open(os.path.join(family_dir, recipe.EXPECTED)) as f:
        expected = f.read().splitlines()
    got = recipe.decode(checkpoint).splitlines()
    made_by = recipe.read_provenance()[family]
    assert len(got) == len(expected), f"{family}: {len(got)} lines instead of {len(expected)}"
    for got_line, expected_line in zip(got, expected):
        assert same_line(got_line, expected_line), \
            f"{family} decodes differently from the fixture (made by {made_by}):\n" \
            f"  now:  {got_line}\n  then: {expected_line}"
