#!/usr/bin/env bash
# Creates (or refreshes) the project-local virtual environment .venv:
#   torch 2.13.0 CPU (the on-disk build), fairseq-fixed 0.12.3.1 built from its
#   hash-pinned sdist against that torch, the runtime dependencies, and this
#   package in editable mode. Idempotent: a second run only checks a stamp.
set -euo pipefail
cd "$(dirname "$0")"

VENV=${POSNET_VENV:-.venv}
PYTHON=${PYTHON:-python3.11}
TORCH_VERSION=2.13.0
# The fairseq wheel links against torch's C++ ABI: cache it per torch version,
# outside the clone, so fresh clones on the same machine skip the 2.5 min build.
WHEEL_CACHE=${POSNET_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/posnet-fairseq/torch-$TORCH_VERSION}

stamp="$VENV/.posnet-setup"
want=$(cat setup.sh setup.py requirements/*.txt | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$VENV/bin/python" -c "import posnet_fairseq" 2>/dev/null; then
  echo "setup: $VENV is up to date"
  exit 0
fi

command -v "$PYTHON" >/dev/null || { echo "setup: $PYTHON not found (set PYTHON=...); Python 3.11 is required" >&2; exit 1; }
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
pip="$VENV/bin/python -m pip --disable-pip-version-check -q"

# torch first and pinned: anything unpinned would fetch a multi-GB CUDA build.
$pip install "torch==$TORCH_VERSION" setuptools wheel
$pip install -r requirements/runtime.txt

if ! ls "$WHEEL_CACHE"/fairseq_fixed-0.12.3.1-*.whl >/dev/null 2>&1; then
  echo "setup: building fairseq-fixed 0.12.3.1 against torch $TORCH_VERSION (about 2.5 minutes, once)"
  mkdir -p "$WHEEL_CACHE"
  $pip wheel --no-deps --no-build-isolation --no-binary fairseq-fixed \
      --require-hashes -r requirements/fairseq.txt -w "$WHEEL_CACHE"
fi
$pip install --no-deps --force-reinstall "$WHEEL_CACHE"/fairseq_fixed-0.12.3.1-*.whl
$pip install --no-deps -e .

"$VENV/bin/python" -c "import posnet_fairseq, fairseq; print('setup: fairseq', fairseq.__version__, '+ posnet_fairseq ready in $VENV')"
echo "$want" > "$stamp"
