"""The supported Python and torch range (posnet_fairseq.compat.check_versions) and
its refusal, both at import time and in ``setup.sh`` before anything is installed."""
import glob
import os
import subprocess
import sys

import pytest

from posnet_fairseq import compat
from posnet_fairseq.compat import UnsupportedEnvironmentError, check_python, check_torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("version", [(3, 10, 13), (3, 11, 7), (3, 12, 1), (3, 13, 0)])
def test_supported_python_passes(version):
    check_python(version)


@pytest.mark.parametrize("version, why", [((3, 9, 18), " (requirements/runtime.txt pins numpy 2.2.6"),
                                          ((3, 14, 0), " (newer Pythons have not been tested")])
def test_python_outside_the_range_is_refused_naming_what_to_install(version, why):
    shown = ".".join(map(str, version))
    with pytest.raises(UnsupportedEnvironmentError) as err:
        check_python(version)
    assert f"Python 3.10 to 3.13; this is Python {shown}{why}" in str(err.value)
    assert "Install Python 3.13" in str(err.value)


@pytest.mark.parametrize("version", ["2.6.0+cu124", "2.11.0+cu130", "2.13.0+cpu", "2.14.1"])
def test_supported_torch_passes(version):
    check_torch(version)


@pytest.mark.parametrize("version, why", [
    ("2.5.1+cu124", "unpickles checkpoints"),
    ("1.13.1", "unpickles checkpoints"),
    ("2.15.0", "not been tested"),
    ("2.16.0a0+git1234567", "not been tested"),
    ("3.0.0", "not been tested"),
    ("unknown", "not been tested"),
])
def test_torch_outside_the_range_is_refused_naming_what_to_install(version, why):
    with pytest.raises(UnsupportedEnvironmentError) as err:
        check_torch(version)
    message = str(err.value)
    assert f"torch 2.6 to 2.14; this environment has torch {version} (" in message
    assert why in message
    assert "pip install 'torch>=2.6,<2.15'" in message


def test_this_environment_is_in_the_range():
    compat.check_versions()


def test_import_refuses_an_unsupported_torch(monkeypatch):
    """check_fairseq (run when posnet_fairseq is imported) runs the range check first."""
    import torch

    monkeypatch.setattr(torch, "__version__", "2.5.1+cu124")
    with pytest.raises(UnsupportedEnvironmentError, match=r"torch 2\.5\.1\+cu124"):
        compat.check_fairseq()


def _fake_torch(tmp_path, body):
    """A directory holding a stand-in ``torch`` package, to put first on PYTHONPATH."""
    package = tmp_path / "fake" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(body)
    return str(package.parent)


def _setup(args, env_extra, tmp_path):
    env = dict(os.environ, POSNET_WHEEL_CACHE=str(tmp_path / "cache"), **env_extra)
    return subprocess.run(["bash", os.path.join(ROOT, "setup.sh"), *args], env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("torch_body, expected", [
    ("__version__ = '2.5.1+cu124'\n", "this environment has torch 2.5.1+cu124"),
    ("raise ImportError('no torch in this test')\n", "torch does not import in"),
])
def test_setup_current_env_refuses_before_installing(tmp_path, torch_body, expected):
    result = _setup(["--current-env"], {"PYTHON": sys.executable,
                                        "PYTHONPATH": _fake_torch(tmp_path, torch_body)}, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert expected in result.stderr
    assert "building fairseq-fixed" not in result.stdout
    assert not (tmp_path / "cache").exists()


def _python_3_9():
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.9*/bin/python3.9")))
    return found[0] if found else None


@pytest.mark.skipif(_python_3_9() is None, reason="no Python 3.9 under ~/.pyenv to try the refusal with")
@pytest.mark.parametrize("args", [["--current-env"], []], ids=["current-env", "fresh-venv"])
def test_setup_refuses_python_3_9(tmp_path, args):
    venv = tmp_path / "venv"
    result = _setup(args, {"PYTHON": _python_3_9(), "POSNET_VENV": str(venv)}, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "supports Python 3.10 to 3.13; this is Python 3.9" in result.stderr
    assert not venv.exists()


def test_setup_rejects_an_unknown_option(tmp_path):
    result = _setup(["--curent-env"], {}, tmp_path)
    assert result.returncode == 2
    assert "unknown option '--curent-env'" in result.stderr
