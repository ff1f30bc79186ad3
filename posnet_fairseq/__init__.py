"""posnet_fairseq: position-based token mixing for fairseq's translation Transformer.

This package is a fairseq ``--user-dir``: importing it registers the
``posnet_transformer`` model, its named architectures and every mixer, and
allow-lists the classes fairseq stores in checkpoints for torch's safe loader.
"""
from .compat import allow_fairseq_checkpoint_classes, check_fairseq

check_fairseq()
allow_fairseq_checkpoint_classes()

from . import mixers  # noqa: E402,F401
from . import models  # noqa: E402,F401

__version__ = "0.1.0"
