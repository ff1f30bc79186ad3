"""``--in-place``: a tool whose output is one of its inputs refuses to run unless the user says so.

``posnet-quantize X X`` replaced a 17 MB training checkpoint by its int8 form without a word. Every tool that
writes a file it may also read (``posnet-quantize``, ``posnet-precompute``, ``posnet-average-checkpoints``,
``posnet-spm train``) calls :func:`refuse_overwrite` after parsing; with ``--in-place`` the output is written
as it always is, whole or not at all (:mod:`posnet_fairseq.atomic_files`), so an interruption leaves the
input as it was.
"""
import os


def add_flag(parser):
    parser.add_argument("--in-place", action="store_true",
                        help="allow the output to replace an input (written whole or not at all)")


def _same(a, b):
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def refuse_overwrite(parser, inputs, outputs, in_place):
    """Exits through ``parser.error`` naming the file when an output of ``outputs`` is an input of ``inputs``
    (the same path, or a link to it), unless ``in_place``."""
    if in_place:
        return
    for output in outputs:
        same = next((i for i in inputs if _same(i, output)), None)
        if same is not None:
            parser.error(f"the output {output} is the input {same}: it would be overwritten; write elsewhere, or "
                         "give --in-place to replace it")
