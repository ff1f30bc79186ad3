"""The plugin's own lines in a model's training log, carried up into the comparison (issue 49).

A model's log (``OUT/checkpoints/MODEL.train.log``) holds fairseq-train's
output and, among it, the lines of the plugin's wrapper (``posnet-train: ...``):
its one-line reason for failing ("no space left on DIR: ...") and its notices
("... was truncated ...; restored from checkpoint_best.pt, ..."). fairseq logs
the traceback of a failed checkpoint save itself, before the wrapper's line,
so the last line naming an error is torch's ("[enforce fail at
inline_container.cc:672] . unexpected pos 64 vs 0"), not the reason: the
wrapper's line, when it comes after every such line, is the reason the
comparison reports (its summary line, results.md, results.csv). Its notices
go into the comparison's own log, since nobody reads the model's log of a
model that finished.
"""
from .. import fairseq_log

WRAPPER = "posnet-train: "


def reason(tail):
    """Why a failed training ended, from the last lines of its log: the last line that is the wrapper's or names
    an error (a wrapper's line after fairseq's traceback is its explanation of that traceback), else the last
    line."""
    lines = [line.strip() for line in tail if line.strip()]
    return next((line for line in reversed(lines) if line.startswith(WRAPPER) or "Error" in line),
                lines[-1] if lines else "")


def notices(log_path, returncode):
    """The wrapper's lines of the last fairseq-train process in ``log_path`` (after its start mark), but the one
    that is its reason for failing (``returncode`` > 0; said in the FAILED line)."""
    with open(log_path, errors="replace") as f:
        lines = f.read().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(fairseq_log.START_MARK)]
    section = lines[starts[-1] + 1:] if starts else lines
    said = reason(section) if returncode > 0 else None
    return [line.strip() for line in section if line.startswith(WRAPPER) and line.strip() != said]


def forward(log_path, returncode, prefix, log):
    """Logs each notice of the process that just ended as ``PREFIX: LINE``."""
    for line in notices(log_path, returncode):
        log(f"{prefix}: {line}")
