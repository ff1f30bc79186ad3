"""The checkpoints of a training that starts again from update 0 are set aside, not deleted (issue 49).

When a model's ``checkpoint_last.pt`` is gone, fairseq-train starts it from
update 0 in the same save directory. Its earlier checkpoints would mix into
the new training: fairseq would overwrite ``checkpoint_best.pt`` at the first
validation, and an earlier update checkpoint could be averaged with the new
ones. They are moved, whole, to ``OUT/checkpoints/MODEL.discarded/`` (a rename:
no space is used), and the run's log names them and the folder; the user
decides whether to delete it.
"""
import os

from .steps import DELETED


def set_aside(save_dir, log, prefix):
    """Moves the checkpoints of ``save_dir`` (and what ``--delete-checkpoints`` left of them) to a new folder
    beside it, ``SAVE_DIR.discarded`` (``.discarded.2``, ... when that exists), and logs ``PREFIX: ...`` naming
    them; returns that folder, or None when there were none."""
    names = sorted(name for name in os.listdir(save_dir)
                   if name.startswith("checkpoint") and name.endswith((".pt", ".pt" + DELETED)))
    if not names:
        return None
    folder, n = save_dir + ".discarded", 1
    while os.path.exists(folder):
        n += 1
        folder = f"{save_dir}.discarded.{n}"
    os.makedirs(folder)
    size = 0
    for name in names:
        size += os.path.getsize(os.path.join(save_dir, name))
        os.replace(os.path.join(save_dir, name), os.path.join(folder, name))
    log(f"{prefix}: the {len(names)} checkpoint files of the earlier training ({', '.join(names)}; "
        f"{size / 2 ** 20:.1f} MiB) are set aside in {folder}, so that they do not mix into the new training; "
        "delete that folder to free the space")
    return folder
