"""tests/gpu-measure.sh, the prepared GPU run, on the CPU with its device faked (POSNET_GPU_FAKE=1): every part
runs or is reported as not measured, a part past its limit stops without stopping the others, and the
results come back as the device tool takes them (a tar and the summary in $OUT)."""
import os
import subprocess
import sys
import tarfile

SCRIPT = os.path.join(os.path.dirname(__file__), "gpu-measure.sh")


def _run(tmp_path, python=sys.executable, **env):
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "POSNET_GPU_FAKE": "1", "POSNET_GPU_DOCS": str(tmp_path / "docs"), "OUT": str(out),
           "PYTHON": python, "OMP_NUM_THREADS": "1", **env}
    done = subprocess.run(["bash", SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    (folder,) = (tmp_path / "docs").iterdir()
    return done, folder, out


def _summary_rows(text):
    rows = [line.strip("|").split("|") for line in text.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): cells[4].strip() for cells in rows[1:]}


def test_the_parts_run_and_one_past_its_limit_is_reported_not_measured(tmp_path):
    done, folder, out = _run(tmp_path, POSNET_GPU_ARCHS_OPCOUNTS="transformer,rposnet_transformer",
                             POSNET_GPU_ARCHS_DECODE="transformer", POSNET_LIMIT_TRAIN="1",
                             POSNET_LIMIT_CTRANSLATE2="1")
    assert done.returncode == 1, done.stderr  # a part stopped at its limit
    assert folder.name.endswith("-fake-cpu")
    summary = (folder / "summary.md").read_text()
    result = _summary_rows(summary)
    assert list(result) == ["install", "device", "opcounts", "decode", "train", "ctranslate2"]
    assert [result[p] for p in ("install", "device", "opcounts", "decode")] == ["done"] * 4
    for part in ("train", "ctranslate2"):
        assert result[part].startswith("stopped at its limit")
        assert f"- {part}: stopped after 1s" in summary
    ops = (folder / "op_counts.md").read_text()
    assert "| posnet_transformer_tiny |" in ops and "| rposnet_transformer_tiny |" in ops
    assert "| 1.00x |" in ops
    assert "| posnet_transformer_tiny |" in (folder / "decode_speed_batch128.md").read_text()
    # what the device tool brings back: the folder as a tar, and the summary
    assert (out / "summary.md").read_text() == summary
    with tarfile.open(out / "gpu-run.tar.gz") as tar:
        names = set(tar.getnames())
    assert {f"{folder.name}/{f}" for f in ("summary.md", "op_counts.md", "device.txt", "install.log")} <= names


def test_a_failed_install_runs_nothing_else_and_says_so(tmp_path):
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'No module named fairseq' >&2\nexit 1\n")
    broken.chmod(0o755)
    done, folder, _ = _run(tmp_path, python=str(broken))
    assert done.returncode == 1
    summary = (folder / "summary.md").read_text()
    result = _summary_rows(summary)
    assert result["install"] == "failed (exit 1): see its log"
    for part in ("device", "opcounts", "decode", "train", "ctranslate2"):
        assert result[part] == "not run: the install failed"
        assert f"- {part}: not run (the install failed)" in summary
    assert "No module named fairseq" in (folder / "install.log").read_text()


def test_ctranslate2_without_its_cuda_library_is_not_run_and_says_why(tmp_path):
    done, folder, _ = _run(tmp_path, POSNET_GPU_ARCHS_OPCOUNTS="transformer", POSNET_GPU_ARCHS_DECODE="transformer",
                           POSNET_GPU_ARCHS_TRAIN="transformer", POSNET_LIMIT_TRAIN="1",
                           POSNET_CT2_LIBRARY="libposnet-absent.so.12")
    summary = (folder / "summary.md").read_text()
    why = "CTranslate2's CUDA build needs libposnet-absent.so.12, which does not load here"
    assert _summary_rows(summary)["ctranslate2"] == f"not run: {why}"
    assert f"- ctranslate2: not run ({why})" in summary
    assert not (folder / "decode_speed_ctranslate2.md").exists()


def test_a_second_run_on_one_day_writes_its_own_folder(tmp_path):
    env = dict(POSNET_GPU_ARCHS_OPCOUNTS="transformer", POSNET_GPU_ARCHS_DECODE="transformer",
               POSNET_GPU_ARCHS_TRAIN="transformer", POSNET_LIMIT_TRAIN="1", POSNET_LIMIT_DECODE="1",
               POSNET_LIMIT_CTRANSLATE2="1")
    (tmp_path / "a").mkdir()
    _, first, _ = _run(tmp_path / "a", **env)
    (first / "earlier-only.md").write_text("a log of the first run\n")
    docs = tmp_path / "a" / "docs"
    out = tmp_path / "out-second"
    out.mkdir()
    done = subprocess.run(["bash", SCRIPT], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "POSNET_GPU_FAKE": "1", "POSNET_GPU_DOCS": str(docs), "OUT": str(out),
                               "PYTHON": sys.executable, "OMP_NUM_THREADS": "1", **env})
    assert sorted(p.name for p in docs.iterdir()) == [first.name, f"{first.name}-2"], done.stderr
    second = docs / f"{first.name}-2"
    assert (second / "summary.md").exists() and not (second / "earlier-only.md").exists()
    assert (first / "earlier-only.md").exists()
    assert (out / "summary.md").read_text() == (second / "summary.md").read_text()
