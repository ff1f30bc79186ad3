#!/usr/bin/env bash
# The wheels tests/gpu-measure.sh installs on a GPU machine without network, made on a machine with PyPI:
#
#   bash tests/gpu-wheels.sh [python3.12]          -> .whl/ (git-ignored, about 44 MB; or $POSNET_WHEELS)
#
# For the GPU image of docs/install.md (Python 3.12, its own torch, numpy, sacrebleu, sentencepiece,
# scikit-learn, matplotlib, regex, pytest): only what it lacks, installed there with --no-deps.
#   - fairseq-fixed, built for that Python from its hash-pinned sdist (requirements/fairseq.txt).
#     fairseq's setup.py imports torch only for its three torch C++ extensions (libbase, libnat and an
#     alignment binding), which nothing in this project imports, and PyPI has no CPU torch for this
#     Python: so the build gets a stand-in torch.utils.cpp_extension under which those three are optional
#     extensions that fail to compile without torch's headers and are left out; the Cython and C
#     extensions (data_utils_fast, token_block_utils_fast, libbleu) are built as always.
#   - antlr4-python3-runtime (omegaconf's; source only on PyPI), built as a wheel;
#   - hydra-core, omegaconf, bitarray, subword-nmt, sacremoses, nltk (requirements/runtime.txt) and
#     ctranslate2 (requirements/ctranslate2.txt), downloaded as manylinux cp312 wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
base_python=${1:-python3.12}
out=${POSNET_WHEELS:-.whl}
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT

"$base_python" -m venv "$build/venv"
pip="$build/venv/bin/python -m pip --disable-pip-version-check -q"
$pip install "numpy>=2" cython setuptools wheel  # fairseq's build needs: numpy 2 builds work with numpy 1 and 2
mkdir -p "$build/torch/torch/utils" "$out"
: > "$build/torch/torch/__init__.py"
: > "$build/torch/torch/utils/__init__.py"
cat > "$build/torch/torch/utils/cpp_extension.py" <<'EOF'
# Build-time stand-in (tests/gpu-wheels.sh): torch's C++ extensions become optional, left out without torch.
from setuptools import Extension
from setuptools.command.build_ext import build_ext as BuildExtension


def CppExtension(name, sources, **kwargs):
    return Extension(name, sources, optional=True, **kwargs)
EOF
PYTHONPATH="$build/torch" $pip download --no-deps --no-binary :all: --no-build-isolation --require-hashes \
  -r requirements/fairseq.txt -d "$build/sdist"
PYTHONPATH="$build/torch" env -u CUDA_HOME $pip wheel --no-deps --no-build-isolation "$build"/sdist/fairseq*.tar.gz -w "$out"
# The device tool carries at most 64 MiB with the working tree: leave out the wheel's 9.5 MB of example
# data (fairseq/examples/: test arrays, notebooks, images), which nothing imports; its Python stays.
"$base_python" - "$out"/fairseq_fixed-*.whl <<'PY'
import os
import sys
import zipfile

path = sys.argv[1]
kept = path + ".tmp"
with zipfile.ZipFile(path) as src, zipfile.ZipFile(kept, "w", zipfile.ZIP_DEFLATED) as dst:
    gone = {i.filename for i in src.infolist()
            if i.filename.startswith("fairseq/examples/") and not i.filename.endswith(".py")}
    for info in src.infolist():
        if info.filename in gone:
            continue
        data = src.read(info)
        if info.filename.endswith(".dist-info/RECORD"):
            data = b"".join(line for line in data.splitlines(keepends=True)
                            if line.split(b",")[0].decode() not in gone)
        dst.writestr(info, data)
os.replace(kept, path)
PY
$pip wheel --no-deps -w "$out" antlr4-python3-runtime==4.9.3
version=$("$base_python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
$pip download --no-deps --only-binary=:all: --python-version "$version" --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$out" \
  $(grep -hE '^(hydra-core|omegaconf|bitarray|subword-nmt|sacremoses|nltk|ctranslate2)==' \
    requirements/runtime.txt requirements/ctranslate2.txt)
ls -l "$out"
du -sh "$out"
