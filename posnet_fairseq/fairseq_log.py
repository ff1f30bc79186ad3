"""What fairseq's own logs say: the one reader of fairseq-train's and fairseq-generate's log lines.

fairseq-train with ``--log-format simple`` writes, with or without a logging prefix
(``2026-01-01 10:00:00 | INFO | train_inner |``):

* ``epoch 001:    100 / 900 loss=9.1, ..., wps=1234.5, ..., num_updates=100`` every ``--log-interval`` updates;
* ``epoch 001 | loss 9.3 | ... | wps 1720.1 | ... | num_updates 900`` at the end of an epoch;
* ``epoch 001 | valid on 'valid' subset | loss 8.9 | ... | num_updates 200`` after each validation;
* ``Saved checkpoint DIR/checkpoint_1_200.pt (epoch 1 @ 200 updates, ...)`` after each save;
* ``early stop since valid performance hasn't improved for last 10 runs`` when ``--patience`` stops it;
* ``fairseq_cli.train | done training in 12.3 seconds`` at the end of its budget.

fairseq-generate ends with ``Translated 3,003 sentences (88,412 tokens) in 41.7s``.

A tool that appends the logs of several fairseq-train processes to one file writes :data:`START_MARK`
before each, so that the reader knows where a process starts (a resumed training, a restart).
"""
import datetime
import os
import re
from typing import List, NamedTuple, Tuple

START_MARK = "posnet-compare: fairseq-train starts at "

_INNER = re.compile(r"epoch (\d+):\s+(\d+) / (\d+) .*num_updates=(\d+)")
_UPDATES = re.compile(r"\| (?:train|valid) \| epoch (\d+) \|.*\| num_updates (\d+)")
_VALID = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \| INFO \| valid \| epoch (\d+) \| valid on '[^']*' subset"
                    r" \| loss ([\d.]+) .*\| num_updates (\d+)")
_SAVED = re.compile(r"Saved checkpoint (\S+) \(epoch \d+ @ (\d+) updates")
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \|")
_DONE = "| fairseq_cli.train | done training in "
_EARLY_STOP = "early stop since valid performance hasn't improved"
_WPS_INNER = re.compile(r"epoch \d+:\s+\d+ / \d+ .*?\bwps=([\d.]+)")
_WPS_EPOCH = re.compile(r"epoch \d+ \| (?!valid on).*?\| wps ([\d.]+) \|")
_TRANSLATED = re.compile(r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in ([\d.]+)s")


class Progress(NamedTuple):
    epoch: int
    step: int  # batches done in the epoch
    steps: int  # batches per epoch
    updates: int


def _lines(path):
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8", errors="replace") as f:
        yield from f


def _text(path):
    """The whole log; FileNotFoundError naming the path when there is none (asked for by a flag)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def progress(path) -> Progress:
    """Where the training of a fairseq-train log stands, from its last progress lines."""
    epoch, step, steps, updates = 1, 0, 1, 0
    for line in _lines(path):
        m = _INNER.search(line)
        if m:
            epoch, step, steps, updates = (int(g) for g in m.groups())
            continue
        m = _UPDATES.search(line)
        if m:
            epoch, updates = int(m.group(1)), int(m.group(2))
    return Progress(epoch, step, steps, updates)


def _last_process_wrote(path, text) -> bool:
    """Whether the last fairseq-train process of a log wrote a line holding ``text``."""
    wrote = False
    for line in _lines(path):
        if line.startswith(START_MARK):
            wrote = False
        elif text in line:
            wrote = True
    return wrote


def finished(path) -> bool:
    """Whether the last fairseq-train process of a log ran to the end of its budget."""
    return _last_process_wrote(path, _DONE)


def stopped_early(path) -> bool:
    """Whether the last fairseq-train process of a log was stopped by its ``--patience`` (not by its budget)."""
    return _last_process_wrote(path, _EARLY_STOP)


def saved_checkpoints(path) -> List[Tuple[int, str]]:
    """[(updates, file name)] of every checkpoint fairseq saved, in order (fairseq logs the first
    file of each save; the others, checkpoint_last.pt among them, are copies of it)."""
    return [(int(m.group(2)), os.path.basename(m.group(1))) for line in _lines(path)
            for m in [_SAVED.search(line)] if m]


def valid_curve(path) -> List[Tuple[int, float, float]]:
    """[(updates, training seconds, valid loss)] from a training log. Seconds count from the first
    "begin training epoch" of each fairseq-train process (start-up excluded); the time between an
    interruption and the resumed run is left out."""
    def seconds(stamp):
        return datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").timestamp()

    points, offset, start, last = [], 0.0, None, None
    for line in _lines(path):
        if line.startswith(START_MARK):
            if start is not None and last is not None:
                offset += last - start
            start, last = None, None
            continue
        m = _STAMP.match(line)
        if m and start is None and "| fairseq.trainer | begin training epoch" in line:
            start = seconds(m.group(1))
        if m and start is not None:
            last = seconds(m.group(1))
        m = _VALID.match(line)
        if m and start is not None:
            points.append((int(m.group(4)), offset + seconds(m.group(1)) - start, float(m.group(3))))
    return points


def train_speed(path) -> dict:
    """Median target tokens per second of fairseq's log lines every --log-interval updates, or of its
    end-of-epoch lines when training was shorter than one log interval."""
    text = _text(path)
    for kind, pattern in (("train_inner", _WPS_INNER), ("train", _WPS_EPOCH)):
        values = sorted(float(v) for v in pattern.findall(text))
        if values:
            return {"wps": values[len(values) // 2], "lines": len(values), "source": kind}
    raise ValueError(f"{path}: no training line with wps (is it fairseq-train's --log-file?)")


def decode_seconds(path) -> dict:
    """fairseq-generate's own timing of the translation (model loading excluded), from its log."""
    found = _TRANSLATED.findall(_text(path))
    if not found:
        raise ValueError(f"{path}: no 'Translated N sentences ... in Xs' line (is it fairseq-generate's stderr?)")
    sentences, tokens, seconds = found[-1]
    return {"seconds": float(seconds), "sentences": int(sentences.replace(",", "")),
            "tokens": int(tokens.replace(",", ""))}
