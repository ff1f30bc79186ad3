"""benchmarks/train_speed.py: its --quick mode on CPU prints one row per arch with
ratios against the Transformer and the -SA ceiling measured in the same run."""
import contextlib
import io
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import train_speed  # noqa: E402


@pytest.mark.parametrize("size", ["tiny", "base"])
def test_every_default_arch_is_a_registered_preset(size):
    names = train_speed.DEFAULT_ARCHS.split(",")
    archs = [train_speed.resolve(name, size) for name in names]
    assert len(set(archs)) == len(names)
    assert archs[0] == f"posnet_transformer_{size}"


def _rows(output):
    rows = [line.strip("|").split("|") for line in output.splitlines() if line.startswith("| ")]
    header, body = rows[0], rows[1:]
    return [dict(zip((h.strip() for h in header), (c.strip() for c in row))) for row in body]


def test_quick_cpu_table_has_a_row_per_arch_and_the_baseline_at_one():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        train_speed.main(["--quick", "--threads", "1", "--archs", "transformer,transformer_nosa,hc_gaussian_shx,aan_plus_avg"])
    text = out.getvalue()
    assert text.startswith("device: CPU")
    rows = _rows(text)
    assert [r["arch"] for r in rows] == ["posnet_transformer_tiny", "transformer_nosa_tiny", "hc_gaussian_shx_tiny",
                                         "aan_plus_avg_tiny"]
    assert rows[0]["speed/Transformer"] == "1.00x"
    assert rows[1]["speed/-SA"] == "1.00x"
    for row in rows:
        assert float(row["tgt tok/s"]) > 0
        assert row["peak MiB"] == "n/a" and row["max tokens"] == "n/a"  # CUDA only


@pytest.mark.parametrize("argv, message", [
    (["--quick", "--archs", "transformer,hc_gaussian"], "--ceiling transformer_nosa is not among --archs"),
    (["--quick", "--precision", "amp", "--device", "cpu"], "--precision amp needs --device cuda"),
])
def test_bad_options_are_refused_naming_the_flag(argv, message, capsys):
    with pytest.raises(SystemExit):
        train_speed.parse_args(argv)
    assert message in capsys.readouterr().err


def test_an_unknown_arch_names_the_flag():
    with pytest.raises(SystemExit, match="--archs no_such_mixer: no preset no_such_mixer_tiny"):
        train_speed.resolve("no_such_mixer", "tiny")
