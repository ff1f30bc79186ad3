"""Files the plugin's tools write whole or not at all: the checkpoints of ``posnet-average-checkpoints`` and
``posnet-precompute``.

:func:`written_atomically` hands out ``PATH.tmp`` and renames it to ``PATH`` only when the writer finished,
so a reader never sees a half-written checkpoint. Whatever stops the writer (a full disk, Ctrl-C, SIGTERM,
an error) removes the ``.tmp`` file; a full disk is reported as :class:`NoSpaceLeft`, one sentence naming the
directory, instead of torch's "unexpected pos 704 vs 598" or a bare ``[Errno 28]``.
"""
import contextlib
import errno
import os


class NoSpaceLeft(OSError):
    """The disk holding ``directory`` filled up while writing ``path``."""

    def __init__(self, directory, path):
        super().__init__(errno.ENOSPC, f"no space left on {directory} (writing {os.path.basename(path)}, removed "
                                       "again): free space there, or write the output to another directory")
        self.directory = directory

    def __str__(self):
        return self.strerror


def is_disk_full(err: BaseException) -> bool:
    return isinstance(err, OSError) and err.errno == errno.ENOSPC


@contextlib.contextmanager
def written_atomically(path):
    """A binary file to write ``path``'s contents into; ``path`` appears once the ``with`` block ends."""
    tmp = path + ".tmp"
    try:
        # torch.save given a file object reports a full disk as OSError(ENOSPC); given a path, its zip
        # writer says only "unexpected pos".
        with open(tmp, "wb") as f:
            yield f
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        if is_disk_full(err) and not isinstance(err, NoSpaceLeft):
            raise NoSpaceLeft(os.path.dirname(os.path.abspath(path)), path) from err
        raise
