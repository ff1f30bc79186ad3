"""posnet_fairseq: position-based token mixing for fairseq's translation Transformer.

This package is a fairseq ``--user-dir``: importing it registers the
``posnet_transformer`` model, its named architectures, every mixer and the
``translation_concat`` task, allow-lists the classes fairseq stores in
checkpoints for torch's safe loader and makes fairseq-train's checkpoint
copies atomic.
"""
import sys

from .tool_logging import fairseq_imported_quietly

# fairseq's import-time logging set-up and tensorboardX hint left out (tool_logging.py)
with fairseq_imported_quietly(tensorboard=any(a.startswith("--tensorboard-logdir") for a in sys.argv)):
    from .compat import allow_fairseq_checkpoint_classes, check_fairseq, make_checkpoint_copies_atomic

    check_fairseq()
    allow_fairseq_checkpoint_classes()
    make_checkpoint_copies_atomic()

    from . import mixers  # noqa: F401
    from . import models  # noqa: F401
    from . import tasks  # noqa: F401

__version__ = "0.1.0"
