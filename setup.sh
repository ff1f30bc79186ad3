#!/usr/bin/env bash
# Installs posnet-fairseq (docs/install.md). Two ways:
#
#   bash setup.sh                 a fresh project-local .venv: torch 2.13.0 CPU (the
#                                 on-disk build), fairseq-fixed, the runtime
#                                 dependencies, this package (editable). Idempotent:
#                                 a second run only checks a stamp.
#   bash setup.sh --current-env   into the environment of `python` on PATH (or
#                                 $PYTHON), KEEPING its torch (e.g. a CUDA build):
#                                 the runtime dependencies, fairseq-fixed built
#                                 against that torch, this package (editable).
#
# fairseq-fixed 0.12.3.1 comes from its hash-pinned sdist (requirements/fairseq.txt),
# built without build isolation (so against the torch installed), with --no-deps
# (no torchaudio) and without CUDA extensions (CUDA_HOME unset for the build).
# The wheel links against torch's C++ ABI: it is cached, outside the clone, per
# torch version, CUDA tag and Python tag, so a second install skips the 2.5 min build.
set -euo pipefail
cd "$(dirname "$0")"

mode=venv
case "${1:-}" in
  "") ;;
  --current-env) mode=current ;;
  -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "setup: unknown option '$1' (use --current-env, or nothing for a fresh .venv)" >&2; exit 2 ;;
esac

WHEEL_CACHE_ROOT=${POSNET_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/posnet-fairseq}

# $1: the environment's python. Installs the runtime dependencies, fairseq-fixed
# and this package into it without ever changing its torch.
install_into() {
  local py=$1 pip tag torch_before cache
  pip="$py -m pip --disable-pip-version-check -q"
  # torch's version and the wheel-cache tag, e.g. "2.6.0+cu124 torch-2.6.0-cu124-cp310"
  # (-W: a torch without numpy beside it yet warns about that on import).
  read -r torch_before tag < <("$py" -W ignore -c '
import sys, torch
hip = getattr(torch.version, "hip", None)
cuda = "cu" + torch.version.cuda.replace(".", "") if torch.version.cuda else f"rocm{hip}" if hip else "cpu"
base = torch.__version__.split("+")[0]
print(torch.__version__, f"torch-{base}-{cuda}-cp{sys.version_info[0]}{sys.version_info[1]}")')
  cache="$WHEEL_CACHE_ROOT/$tag"
  mkdir -p "$cache"
  # A constraint on the torch that is there: no requirement may up- or downgrade it.
  echo "torch==$torch_before" > "$cache/keep-torch.txt"

  $pip install -c "$cache/keep-torch.txt" setuptools wheel -r requirements/runtime.txt
  $pip install -r requirements/bible.txt  # optional pysword (the Bible corpus), here for tests/test_data_bible.py
  $pip install -r requirements/ctranslate2.txt  # optional CTranslate2 (the decoding benchmark), here for its tests
  if ! ls "$cache"/fairseq_fixed-0.12.3.1-*.whl >/dev/null 2>&1; then
    echo "setup: building fairseq-fixed 0.12.3.1 against torch $torch_before, $tag (about 2.5 minutes, once)"
    env -u CUDA_HOME $pip wheel --no-deps --no-build-isolation --no-binary fairseq-fixed \
        --require-hashes -r requirements/fairseq.txt -w "$cache"
  fi
  $pip install --no-deps --force-reinstall "$cache"/fairseq_fixed-0.12.3.1-*.whl
  $pip install --no-deps --no-build-isolation --use-pep517 -e .

  "$py" - "$torch_before" <<'EOF'
import sys

import torch

if torch.__version__ != sys.argv[1]:
    sys.exit(f"setup: torch changed from {sys.argv[1]} to {torch.__version__} during the install")
import fairseq
import posnet_fairseq

device = f"CUDA {torch.version.cuda}, {torch.cuda.device_count()} GPU(s) visible" if torch.version.cuda else "CPU build"
print(f"setup: fairseq {fairseq.__version__} + posnet_fairseq ready in {sys.prefix} "
      f"(Python {sys.version.split()[0]}, torch {torch.__version__}: {device})")
EOF
}

if [ "$mode" = current ]; then
  PYTHON=${PYTHON:-$(command -v python || command -v python3 || true)}
  [ -n "$PYTHON" ] && command -v "$PYTHON" >/dev/null \
    || { echo "setup: no python on PATH (activate your environment or set PYTHON=...)" >&2; exit 1; }
  echo "setup: installing into $("$PYTHON" -c 'import sys; print(sys.prefix)') ($PYTHON)"
  # Refuses a Python or torch outside the supported range, before anything is installed.
  "$PYTHON" -W ignore posnet_fairseq/compat.py
  install_into "$PYTHON"
  exit 0
fi

VENV=${POSNET_VENV:-.venv}
PYTHON=${PYTHON:-python3.11}
TORCH_VERSION=2.13.0

stamp="$VENV/.posnet-setup"
want=$(cat setup.sh setup.py requirements/*.txt | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$VENV/bin/python" -c "import posnet_fairseq" 2>/dev/null; then
  echo "setup: $VENV is up to date"
  exit 0
fi

command -v "$PYTHON" >/dev/null || { echo "setup: $PYTHON not found (set PYTHON=...); Python 3.11 is the default" >&2; exit 1; }
"$PYTHON" posnet_fairseq/compat.py --python-only
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"

# torch first and pinned: anything unpinned would fetch a multi-GB CUDA build.
"$VENV/bin/python" -m pip --disable-pip-version-check -q install "torch==$TORCH_VERSION"
install_into "$VENV/bin/python"
echo "$want" > "$stamp"
