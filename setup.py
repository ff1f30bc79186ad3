"""posnet-fairseq: position-based token mixing for fairseq translation models.

fairseq itself is deliberately not an install requirement: the plugin works
with any fairseq 0.12 build from upstream main (see README "Install"), and a
dependency on a fairseq distribution would make pip pull torchaudio.
"""
from setuptools import find_packages, setup

setup(
    name="posnet-fairseq",
    version="0.1.0",
    description="Position-based token mixers (PosNet, AAN+, TISA, hard-coded Gaussian) as a fairseq plugin",
    packages=find_packages(include=["posnet_fairseq", "posnet_fairseq.*"]),
    python_requires=">=3.10",
    install_requires=["sacrebleu>=2.0", "sentencepiece", "subword-nmt", "sacremoses", "matplotlib"],
    entry_points={
        "console_scripts": [
            "posnet-train = posnet_fairseq.cli.fairseq_wrappers:train",
            "posnet-generate = posnet_fairseq.cli.fairseq_wrappers:generate",
            "posnet-interactive = posnet_fairseq.cli.fairseq_wrappers:interactive",
            "posnet-validate = posnet_fairseq.cli.fairseq_wrappers:validate",
            "posnet-synth = posnet_fairseq.data.synth:main",
            "posnet-average-checkpoints = posnet_fairseq.cli.average_checkpoints:main",
            "posnet-length-ratio = posnet_fairseq.cli.length_ratio:main",
            "posnet-spm = posnet_fairseq.cli.spm:main",
            "posnet-analyze = posnet_fairseq.cli.analyze:main",
            "posnet-precompute = posnet_fairseq.cli.precompute:main",
            "posnet-quantize = posnet_fairseq.cli.quantize:main",
            "posnet-compare = posnet_fairseq.cli.compare:main",
        ]
    },
)
