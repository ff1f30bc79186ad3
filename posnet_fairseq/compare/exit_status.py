"""The exit status of a ``posnet-compare`` run whose baseline was compared: 1 when a model failed (issue 49).

A model that failed to train or translate keeps its FAILED row, and the
report of the others is written; the run still exits 1, so that a script or a
batch job that runs it sees the failure (it exited 0 before). A failed
baseline ends the run earlier, with its own report and exit status 1.
"""


def of_run(models, training, translation_failed, log):
    """0 when every one of ``models`` trained ({model: TrainOutcome}) and translated; else 1, after a log line
    naming each failed model and its reason."""
    failed = {m: training[m].failed or translation_failed.get(m) for m in models
              if training[m].failed or m in translation_failed}
    if not failed:
        return 0
    log(f"exit status 1: {len(failed)} of {len(models)} models FAILED ("
        + "; ".join(f"{m}: {why.splitlines()[0]}" for m, why in failed.items())
        + "); the report holds the others; fix the cause and run the same command again (what finished is kept)")
    return 1
