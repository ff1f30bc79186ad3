"""How results.md names a file or folder: relative to the run's directory, so that a run's report reads the
same on every machine it is copied to (issue 46 item 6).

An absolute path inside the run (``--out``) is written relative to it (``raw/test.tgt``; the run itself is
``.``); one outside it, which another machine does not have, by its name and :data:`OUTSIDE`
(``train.es (outside the run)``). A relative path stays as the user typed it. The step records keep their
own paths (:mod:`posnet_fairseq.compare.steps`); this is the report's wording only.
"""
import os
import re
import shlex

OUTSIDE = "(outside the run)"


def portable(path, out):
    """``path`` as results.md names it, for the run in ``out`` (see the module docstring)."""
    path, out = os.path.abspath(path), os.path.abspath(out)
    if os.path.commonpath([path, out]) == out:
        return os.path.relpath(path, out)
    return f"{os.path.basename(path)} {OUTSIDE}"


def portable_text(text, paths, out):
    """``text`` with each of ``paths`` (the user's), where it is written as an absolute path, named
    :func:`portable`; in one pass, so that a path inside another's portable name is not named twice. A relative
    path is left as the user typed it (it names no machine)."""
    spellings = {os.path.abspath(path): path for path in paths}
    if not spellings:
        return text
    # a path ends where no name character follows: /runs/a is not the start of /runs/a-2
    pattern = re.compile("(?:" + "|".join(map(re.escape, sorted(spellings, key=len, reverse=True))) + r")(?![\w.-])")
    return pattern.sub(lambda match: portable(match.group(0), out), text)


def command(argv, out):
    """The command line ``argv`` as results.md gives it: each absolute path in it (also after ``--flag=``)
    named :func:`portable`, the arguments quoted for a shell; relative ones as the user typed them."""
    def name(arg):
        flag, sep, value = arg.partition("=")
        if arg.startswith("-") and sep and os.path.isabs(value):
            return f"{flag}={portable(value, out)}"
        return portable(arg, out) if os.path.isabs(arg) else arg
    return " ".join(shlex.quote(name(arg)) for arg in argv)
