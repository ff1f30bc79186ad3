"""Logging around the plugin's import of fairseq: fairseq's import-time noise left out.

Importing fairseq logs "Please install tensorboardX" at INFO (its
text-to-speech task, whatever the task), and one of its model modules
(``wav2vec2_classification``) calls ``logging.basicConfig(level=DEBUG)`` on
import. A process that imports the plugin before fairseq (the ``posnet-*``
tools, a user's script) would then print every DEBUG line of hydra and of
matplotlib's font manager, and fairseq-train's own ``basicConfig`` (INFO,
its line format) would be a no-op. :func:`fairseq_imported_quietly` wraps the
plugin's import of fairseq and undoes that ``basicConfig``; a process that
configured logging itself, or imported fairseq first (fairseq's own tools),
keeps its logging as it was.
"""
import contextlib
import logging

TENSORBOARD_HINT = "Please install tensorboardX"


class _DropMessage(logging.Filter):
    def __init__(self, text):
        super().__init__()
        self.text = text

    def filter(self, record):
        return self.text not in str(record.msg)


@contextlib.contextmanager
def fairseq_imported_quietly(tensorboard=False):
    """Import fairseq inside: the tensorboardX hint is dropped (kept with ``tensorboard``: the user asked
    for tensorboard logging) and a root-logger configuration made during the import is undone."""
    if not tensorboard:
        hint = logging.getLogger("fairseq.tasks.text_to_speech")
        if not any(isinstance(f, _DropMessage) for f in hint.filters):
            hint.addFilter(_DropMessage(TENSORBOARD_HINT))
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        if not handlers and root.handlers:
            for handler in list(root.handlers):
                root.removeHandler(handler)
            root.setLevel(level)
