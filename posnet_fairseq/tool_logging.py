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

It also silences the libraries' notices that fairseq 0.12 sets off and a
user cannot act on (:data:`LIBRARY_NOTICES`), each by its category and the
start of its message, so that a tool's or a benchmark's output is not
preceded by some twenty lines of them; every other warning still shows.
"""
import contextlib
import logging
import warnings

TENSORBOARD_HINT = "Please install tensorboardX"
# (category, regular expression matching the start of the message). fairseq 0.12 builds its config with hydra
# 1.0's experimental compose API (fairseq/dataclass/utils.py), which hydra 1.3 warns about at every call; its
# data loaders ask for pinned memory on machines without an accelerator; it scripts modules with torch.jit
# on import, which torch 2.13 deprecates; its MultiheadAttention hands torch a bool padding mask beside its
# float causal mask (a teacher-forced decoder pass over padded sentences: posnet-compare's analysis step).
LIBRARY_NOTICES = (
    (UserWarning, r"hydra\.experimental\.(initialize|compose)\(\) is no longer experimental"),
    (UserWarning, r"\s*The version_base parameter is not specified"),
    (UserWarning, r"In 'config': Usage of deprecated keyword in package header '# @package _group_'"),
    (UserWarning, r"\s*'config' is validated against ConfigStore schema with the same name"),
    (UserWarning, r"\s*The strict flag in the compose API is deprecated"),
    (UserWarning, r"'pin_memory' argument is set as true but no accelerator is found"),
    (DeprecationWarning, r"`torch\.jit\.script` is deprecated"),
    (UserWarning, r"Support for mismatched key_padding_mask and attn_mask is deprecated"),
)


class _DropMessage(logging.Filter):
    def __init__(self, text):
        super().__init__()
        self.text = text

    def filter(self, record):
        return self.text not in str(record.msg)


@contextlib.contextmanager
def fairseq_imported_quietly(tensorboard=False):
    """Import fairseq inside: the tensorboardX hint is dropped (kept with ``tensorboard``: the user asked
    for tensorboard logging), a root-logger configuration made during the import is undone and the
    libraries' notices of :data:`LIBRARY_NOTICES` are silenced for the process."""
    for category, message in LIBRARY_NOTICES:
        warnings.filterwarnings("ignore", message=message, category=category)
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
