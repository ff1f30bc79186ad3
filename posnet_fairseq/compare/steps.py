"""The one way a ``posnet-compare`` run skips finished work: a step's record.

Every step of a run (the data, each model's training, translation and
analysis, the cost) keeps ``OUT/steps/NAME.json``: its settings, its inputs
and its outputs, each file or folder identified by its content (size and
SHA-256), with paths relative to ``--out`` (a run moved or copied elsewhere
finds its own files), and what it found (``result``). A re-run skips a step
only when

* the settings are the same,
* every input has the same content (the same file under another path, or
  the same relative path to other contents, is recognised as what it is), and
* every output the step claims is there and intact;

otherwise the step runs again (a damaged or deleted output is made again). A step made for more members
(the cost of more models) serves a run of some of them (:meth:`Steps.done_for_more`).
A file removed by :meth:`Steps.delete` (``--delete-checkpoints``) leaves
``FILE.deleted`` in its place: its content as it was, so that every record
naming it still finds it intact, and the facts later steps read instead of
it; a step that must read the file itself is told that it is gone.
A step that starts records its settings at once (:meth:`Steps.begin`), so
that a run which changes a half-done model's flags is told; a step that
fails forgets them (:meth:`Steps.forget`), so that broken flags lock nothing.
"""
import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from typing import Dict, Iterable, List, Optional

_CHUNK = 1 << 20
DELETED = ".deleted"  # the suffix of what Steps.delete leaves in place of a file


def load_json(path):
    with open(path) as f:
        return json.load(f)


def save_json(path, value):
    """Writes ``value`` to ``path`` whole or not at all (a temporary file, then renamed)."""
    with open(path + ".tmp", "w") as f:
        json.dump(value, f, indent=1)
    os.replace(path + ".tmp", path)


def deleted(path) -> Optional[dict]:
    """What :meth:`Steps.delete` kept of the file ``path`` (its size, SHA-256 and facts); None when the file is
    there or was not deleted so."""
    if os.path.exists(path):
        return None
    try:
        with open(path + DELETED) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


@dataclass
class Record:
    settings: dict
    inputs: Dict[str, dict] = field(default_factory=dict)  # role ("data", "checkpoint") -> content
    outputs: Optional[Dict[str, dict]] = None  # path relative to --out -> content; None: begun, not finished
    result: object = None


class Steps:
    """The step records of the run in ``out_dir``."""

    def __init__(self, out_dir):
        self.out = os.path.abspath(out_dir)
        self.dir = os.path.join(self.out, "steps")
        self._hashes = {}  # (path, size, mtime_ns) -> content, within one run

    # Paths: relative to --out when inside it, so that a moved or copied run refers to its own files.
    def relative(self, path):
        path = os.path.abspath(path)
        inside = os.path.commonpath([path, self.out]) == self.out
        return os.path.relpath(path, self.out) if inside else path

    def absolute(self, path):
        return os.path.join(self.out, path)  # an absolute path stays as it is

    def content(self, path, skip=()) -> Optional[dict]:
        """{"size", "sha256"} of a file, or of a folder's files (names and contents) but those named in
        ``skip``; None when missing. A relative ``path`` is one the user gave: relative to the current
        directory."""
        path = os.path.abspath(path)
        if os.path.isdir(path):
            digest, size = hashlib.sha256(), 0
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for name in sorted(set(files) - set(skip)):
                    inner = self.content(os.path.join(root, name))
                    digest.update(f"{os.path.relpath(os.path.join(root, name), path)}\0{inner['sha256']}\0".encode())
                    size += inner["size"]
            return {"size": size, "sha256": digest.hexdigest()}
        try:
            stat = os.stat(path)
        except OSError:
            gone = deleted(path)
            return None if gone is None else {"size": gone["size"], "sha256": gone["sha256"]}
        key = (path, stat.st_size, stat.st_mtime_ns)
        if key not in self._hashes:
            digest = hashlib.sha256()
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(_CHUNK), b""):
                    digest.update(chunk)
            self._hashes[key] = {"size": stat.st_size, "sha256": digest.hexdigest()}
        return self._hashes[key]

    def contents(self, paths: Iterable[str]) -> Dict[str, dict]:
        return {self.relative(p): self.content(p) for p in paths}

    def input_contents(self, inputs: Dict[str, str]) -> Dict[str, dict]:
        return {role: self.content(path) for role, path in inputs.items()}

    def delete(self, path, **facts):
        """Removes the file ``path``, leaving ``path.deleted``: its content and ``facts`` (JSON values) about
        it, which later steps read instead of the file (:func:`deleted`)."""
        kept = dict(self.content(path), **facts)
        with open(path + DELETED + ".tmp", "w") as f:
            json.dump(kept, f, indent=1)
        os.replace(path + DELETED + ".tmp", path + DELETED)
        os.remove(path)

    def _path(self, name):
        return os.path.join(self.dir, name.replace("/", "--") + ".json")

    def load(self, name) -> Optional[Record]:
        try:
            with open(self._path(name)) as f:
                return Record(**json.load(f))
        except FileNotFoundError:
            return None

    def _save(self, name, record):
        os.makedirs(self.dir, exist_ok=True)
        save_json(self._path(name), asdict(record))

    def names(self, prefix=""):
        """The steps recorded under ``prefix`` ("train/": every model's training)."""
        if not os.path.isdir(self.dir):
            return []
        return sorted(name[:-len(".json")].replace("--", "/") for name in os.listdir(self.dir)
                      if name.endswith(".json") and name.replace("--", "/").startswith(prefix))

    def changed(self, name, settings) -> List[str]:
        """The settings (keys) that differ from those recorded for step ``name`` (begun or finished)."""
        record = self.load(name)
        if record is None:
            return []
        return sorted(k for k in set(record.settings) | set(settings) if record.settings.get(k) != settings.get(k))

    def why_not_done(self, name, settings, inputs: Dict[str, str]) -> Optional[str]:
        """None when step ``name`` finished with these settings and inputs and its outputs are intact, else
        why it must run (for the log)."""
        record = self.load(name)
        if record is None or record.outputs is None:
            return "not finished"
        if record.settings != settings:
            return "its settings changed (" + ", ".join(self.changed(name, settings)) + ")"
        changed = self.changed_inputs(record, inputs)
        if changed:
            return "its input changed: " + ", ".join(changed)
        return self.damaged_output(record)

    def changed_inputs(self, record: Record, inputs: Dict[str, str], recorded_more=False) -> List[str]:
        """The roles of ``inputs`` ({role: path}) whose content is not the one ``record`` holds; with
        ``recorded_more``, roles that only ``record`` has do not count (a step made with more inputs)."""
        now = self.input_contents(inputs)
        roles = set(now) if recorded_more else set(now) | set(record.inputs)
        return sorted(role for role in roles if now.get(role) != record.inputs.get(role))

    def damaged_output(self, record: Record) -> Optional[str]:
        """Why an output of the finished step ``record`` is not intact (missing or damaged), for the log; None
        when every one is."""
        for path, content in record.outputs.items():
            found = self.content(self.absolute(path))
            if found != content:
                return f"its output {path} is {'missing' if found is None else 'damaged'}"
        return None

    def done_for_more(self, name, settings, inputs: Dict[str, str], members, per_member=()):
        """Whether step ``name`` finished for more members than ``settings[members]`` (a list; the same first
        one), with the same other settings, each of our members' entries of the ``per_member`` settings
        ({member: value}) the same, the inputs both have of the same content, and its outputs intact."""
        record = self.load(name)
        if record is None or record.outputs is None:
            return False
        ours, theirs = settings[members], record.settings.get(members, [])
        if ours[:1] != theirs[:1] or not set(ours) <= set(theirs):
            return False
        mine, recorded = ({k: v for k, v in of.items() if k not in (members, *per_member)}
                          for of in (settings, record.settings))  # how, not which members, it was made
        if mine != recorded:
            return False
        for key in per_member:
            kept = record.settings.get(key, {})
            if settings.get(key, {}) != {m: kept[m] for m in ours if m in kept}:
                return False
        return not self.changed_inputs(record, inputs, recorded_more=True) and self.damaged_output(record) is None

    def result(self, name):
        return self.load(name).result

    def record(self, name, settings, inputs: Dict[str, str], read):
        """(what step ``name`` found, as ``read(result)`` makes it of its saved form, None) when the step finished
        with these settings and inputs and its outputs are intact; else (None, why it must run, for the log)."""
        why = self.why_not_done(name, settings, inputs)
        return (read(self.result(name)), None) if why is None else (None, why)

    def begin(self, name, settings):
        """Records the settings of a step that starts (the outputs follow when it finishes)."""
        self._save(name, Record(settings))

    def finish(self, name, settings, inputs: Dict[str, str], outputs: Iterable[str], result=None):
        """Records a finished step: ``inputs`` {role: path} and ``outputs`` [path] by content, and what it found
        (``result``: a JSON value, or a typed record saved as its ``stored()``, read back by :meth:`record`)."""
        stored = result.stored() if hasattr(result, "stored") else result
        self._save(name, Record(settings, self.input_contents(inputs), self.contents(outputs), stored))

    def forget(self, name):
        try:
            os.remove(self._path(name))
        except FileNotFoundError:
            pass


class CheckpointsDeleted(RuntimeError):
    """A step that must run again needs checkpoints that --delete-checkpoints removed."""


def require_checkpoints(checkpoints, why):
    """Raises :class:`CheckpointsDeleted` when one of ``checkpoints`` ({model: averaged checkpoint}) was deleted;
    ``why``: what needs them, for the message."""
    gone = [model for model, path in checkpoints.items() if deleted(path) is not None]
    if gone:
        raise CheckpointsDeleted(
            f"{why} needs the checkpoints of {', '.join(gone)}, which --delete-checkpoints removed after an earlier "
            f"run; train them again in a new --out, or remove their records (steps/train--MODEL.json) from this "
            f"one to train them again here")
