"""Ctrl-C and SIGTERM in the plugin's tools: one line and the shell's exit status, no traceback.

:func:`run` calls a tool's work with SIGTERM turned into the same unwinding as Ctrl-C (KeyboardInterrupt), so
files being written are removed (:mod:`posnet_fairseq.atomic_files`) and child processes stopped on the way
out. Then it prints ``TOOL: interrupted`` (``; the same command resumes`` where it does) and exits with
128 + the signal's number: 130 for SIGINT, 143 for SIGTERM, as a shell reports a process the signal killed.
"""
import os
import signal
import sys
import threading

RESUMES = "the same command resumes"


class Interrupted(KeyboardInterrupt):
    """KeyboardInterrupt raised by a signal other than SIGINT."""

    def __init__(self, signum):
        super().__init__(f"signal {signum}")
        self.signum = signum


def _raise(signum, frame):
    raise Interrupted(signum)


def run(tool, work, resumes=None, end_process=False):
    """``work()``'s result; interrupted, exits with the signal's status after the line ``TOOL: interrupted``,
    followed by ``; RESUMES`` (``resumes`` True: :data:`RESUMES`; a string: that string).

    ``end_process``: exit by ``os._exit``, not by shutting the interpreter down. For fairseq's tools run in
    this process: a signal that stopped torch with a native thread running (fairseq-train's data loading)
    can make that shutdown abort ("terminate called without an active exception", status -6), after the
    work has unwound (its files removed) all the same."""
    main_thread = threading.current_thread() is threading.main_thread()  # signal handlers live there only
    previous = signal.signal(signal.SIGTERM, _raise) if main_thread else None
    try:
        return work()
    except KeyboardInterrupt as err:
        signum = getattr(err, "signum", signal.SIGINT)
        how = RESUMES if resumes is True else resumes
        print(f"{tool}: interrupted" + (f"; {how}" if how else ""), file=sys.stderr, flush=True)
        if end_process:
            sys.stdout.flush()
            os._exit(128 + signum)
        sys.exit(128 + signum)
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
