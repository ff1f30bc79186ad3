"""Run N data-parallel training processes on one machine without GPUs (torch.distributed over gloo).

    python -m posnet_fairseq.table_runs.launch --procs N -- fairseq-train ARGS

fairseq spawns one process per GPU by itself, but with ``--cpu`` it finds no
device and spawns none; this starts rank 0..N-1 as separate processes,
appending ``--distributed-rank R`` to ARGS (which carry
``--distributed-world-size N --distributed-backend gloo --distributed-init-method tcp://127.0.0.1:PORT
--distributed-no-spawn --ddp-backend legacy_ddp --cpu``), and fails if any
rank fails; a failed rank stops the others, which would otherwise wait for it forever.
"""
import argparse
import subprocess
import sys

from ..process_pool import ProcessPool


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.procs < 1:
        parser.error("usage: launch --procs N -- fairseq-train ARGS")
    codes = {}

    def record(rank, process):
        codes[rank] = process.returncode

    # One slot per rank: every rank starts at once; a failed one stops the others, which would wait for it.
    ProcessPool([{}] * args.procs, poll_seconds=0.2).run(
        range(args.procs), lambda rank, _: subprocess.Popen(command + ["--distributed-rank", str(rank)]),
        finish=record, stopped=record, stop_on_failure=True)
    codes = [codes[rank] for rank in range(args.procs)]
    failed = [rank for rank, code in enumerate(codes) if code != 0]
    if failed:
        print(f"launch: rank(s) {failed} failed with exit codes {[codes[r] for r in failed]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
