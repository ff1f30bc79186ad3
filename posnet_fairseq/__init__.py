"""posnet_fairseq: position-based token mixing for fairseq's translation Transformer.

This package is a fairseq ``--user-dir``: importing it registers the
``posnet_transformer`` model, its named architectures, every mixer and the
``translation_concat`` task, and allow-lists the classes fairseq stores in
checkpoints for torch's safe loader.
"""
import sys

from .tool_logging import fairseq_imported_quietly

# fairseq's import-time logging set-up and tensorboardX hint left out (tool_logging.py)
with fairseq_imported_quietly(tensorboard=any(a.startswith("--tensorboard-logdir") for a in sys.argv)):
    from .compat import allow_fairseq_checkpoint_classes, check_fairseq

    check_fairseq()
    allow_fairseq_checkpoint_classes()

    from . import mixers  # noqa: F401
    from . import models  # noqa: F401
    from . import tasks  # noqa: F401

__version__ = "0.1.0"
