"""The command-line flags of a run on SLURM, declared once: ``posnet-compare --launcher slurm``
and the table recipes' submitter (:mod:`posnet_fairseq.table_runs.slurm`) add them to their parsers
and read them back as :class:`~posnet_fairseq.launcher.units.SlurmOptions` (docs/cluster.md)."""
from .units import SlurmOptions


def add_arguments(parser, gpus=True):
    """The flags of the jobs, in a group of their own. ``gpus=False`` leaves out --gpus-per-job for a
    tool that sets it from its own flags (the recipes' --gpus, GPUs per node)."""
    group = parser.add_argument_group("SLURM jobs (with --launcher slurm; docs/cluster.md)")
    if gpus:
        group.add_argument("--gpus-per-job", type=int, default=0,
                           help="GPUs of each job (sbatch --gpus-per-node) (default 0: CPU jobs)")
    group.add_argument("--cpus-per-job", type=int, default=1, help="CPU cores of each job (--cpus-per-task) (1)")
    group.add_argument("--partition", help="the partition the jobs go to (default: the cluster's)")
    group.add_argument("--time", type=int, default=24 * 60, metavar="MINUTES",
                       help="time limit of each job, minutes (default 1440); a job that reaches it resumes "
                       "from its checkpoint when the same command is run again")
    group.add_argument("--sbatch", action="append", default=[], metavar="OPTION[=VALUE]",
                       help="any other sbatch option by its long name, e.g. account=nmt, qos=high, "
                       "constraint=a100, exclusive (repeatable)")
    group.add_argument("--poll-seconds", type=float, default=10.0,
                       help="seconds between two squeue calls of the driver (10)")


def slurm_options(parser, args, gpus_per_job=None, nodes=1):
    """The :class:`SlurmOptions` of the parsed ``args``; a bad value is reported by ``parser.error``,
    naming its flag."""
    sbatch = {}
    for option in args.sbatch:
        name, sep, value = option.partition("=")
        name = name.strip().lstrip("-")
        if not name:
            parser.error(f"--sbatch {option!r}: expected OPTION=VALUE or OPTION (sbatch's long name, no dashes)")
        sbatch[name] = value if sep else True
    gpus_per_job = args.gpus_per_job if gpus_per_job is None else gpus_per_job
    for flag, value, least in (("--gpus-per-job", gpus_per_job, 0), ("--cpus-per-job", args.cpus_per_job, 1),
                               ("--time", args.time, 1)):
        if value < least:
            parser.error(f"{flag} {value}: must be at least {least}")
    if args.poll_seconds <= 0:
        parser.error(f"--poll-seconds {args.poll_seconds:g}: must be positive")
    try:
        return SlurmOptions(gpus_per_job=gpus_per_job, cpus_per_job=args.cpus_per_job, partition=args.partition,
                            time_minutes=args.time, sbatch=sbatch, nodes=nodes)
    except ValueError as err:  # an --sbatch option the launcher sets per job
        parser.error(f"--sbatch: {err}")
