"""The seeds of a ``posnet-compare`` run: which ones, how each (architecture, seed) is named, and how the
figures of several seeds combine into one row per architecture.

``--seeds N`` trains every architecture with the seeds ``--seed``, ``--seed`` + 1, ..., ``--seed`` + N - 1;
``--seeds 1,2,3`` names them. The data, the SentencePiece model and the test set are made once, with
``--seed``. Each (architecture, seed) is one training and one translation, named by its key: the bare
architecture name for the seed ``--seed`` (the layout of a run made before seeds existed, so that it
resumes as that seed) and ``ARCH.seedS`` for every other seed (``checkpoints/ARCH.seed2/``,
``gen/ARCH.seed2.out``, the steps ``train/ARCH.seed2`` and ``translate/ARCH.seed2``). A model of
``--seed-offset NAME=N`` keeps those names but trains with the seed S + N (:func:`trained`).

With more than one seed a figure of the table is the mean over the seeds, with ``FIGURE_sd`` (the sample
standard deviation) and ``FIGURE_seedS`` (each seed's value) beside it; a figure that is text (a bucket
beyond a model's positions) is the same for every seed and stays as it is.
"""
import statistics

SUFFIX = ".seed"


def parse(text, first):
    """The seeds of ``--seeds``: a count N (``first`` .. ``first`` + N - 1) or a comma-separated list;
    ValueError naming the flag."""
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    try:
        numbers = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"--seeds {text!r}: expected a count (3) or a comma-separated list of seeds (1,2,3)")
    if len(numbers) == 1 and "," not in str(text):
        if numbers[0] < 1:
            raise ValueError(f"--seeds {text}: at least one seed")
        return [first + i for i in range(numbers[0])]
    if not numbers or len(set(numbers)) != len(numbers):
        raise ValueError(f"--seeds {text!r}: a list of distinct seeds, e.g. 1,2,3")
    return numbers


def key(arch, seed, first):
    """The name of ``arch`` trained with ``seed`` (``first``: the run's --seed, which keeps the bare name)."""
    return arch if seed == first else f"{arch}{SUFFIX}{seed}"


def trained(name, seed, offsets):
    """The seed the model ``name`` (an entry of --archs) of the run's ``seed`` trains with: ``seed`` plus its
    --seed-offset (``offsets``: {name: N})."""
    return seed + offsets.get(name, 0)


def split(name, first):
    """(arch, seed) of a key made by :func:`key`."""
    arch, sep, seed = name.rpartition(SUFFIX)
    if sep and seed.isdigit():
        return arch, int(seed)
    return name, first


def combine(per_seed, seeds, fixed=()):
    """One row from ``per_seed`` (one dict of figures per seed, in the order of ``seeds``): each number
    is the mean over the seeds, with FIGURE_sd and FIGURE_seedS; a figure in ``fixed`` (the same for
    every seed by construction), or missing or text in any seed, keeps the first seed's value."""
    row = {}
    for name, first_value in per_seed[0].items():
        values = [figures.get(name) for figures in per_seed]
        if name not in fixed and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            row[name] = statistics.fmean(values)
            row[f"{name}_sd"] = statistics.stdev(values) if len(values) > 1 else 0.0
            row.update({f"{name}{SUFFIX.replace('.', '_')}{s}": v for s, v in zip(seeds, values)})
        else:
            row[name] = first_value
    return row


def several(seed_list):
    """Whether a run of ``seed_list`` has several seeds: then each quality figure is mean ± sd over them."""
    return len(seed_list) > 1


def mean_sd(row, name, fmt=".1f"):
    """``mean ± sd`` of a combined figure (or the figure as it is when it is not a number)."""
    value = row.get(name)
    if not isinstance(value, (int, float)):
        return "-" if value is None else str(value)
    return f"{format(value, fmt)} ± {format(row.get(name + '_sd', 0.0), fmt)}"
