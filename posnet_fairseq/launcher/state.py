"""The launcher's state file: which job runs which unit, so a re-run can attach.

``<run dir>/launcher.json`` maps each unit name to the id of its latest job,
the queue it went to and how many jobs it has had. It is rewritten (whole,
then renamed over the old one) right after every sbatch, so a driver killed
at any moment leaves a file naming every job it submitted but the one whose
sbatch had not yet answered.
"""
import json
import os
from pathlib import Path

STATE_FILE = "launcher.json"


class StateFile:
    def __init__(self, run_dir, queue_name):
        self.path = Path(run_dir) / STATE_FILE
        self.queue_name = queue_name
        self.units = {}
        if self.path.exists():
            data = json.loads(self.path.read_text())
            if data["queue"] != queue_name:
                raise ValueError(f"{self.path} records jobs of the {data['queue']} launcher, not {queue_name}: "
                                 "use the same launcher, or another run directory")
            self.units = data["units"]

    def job_id(self, name):
        record = self.units.get(name)
        return None if record is None else record["job_id"]

    def submissions(self, name):
        return self.units.get(name, {}).get("submissions", 0)

    def record(self, name, job_id):
        self.units[name] = {"job_id": job_id, "submissions": self.submissions(name) + 1}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".json.tmp")
        temporary.write_text(json.dumps({"queue": self.queue_name, "units": self.units}, indent=1, sort_keys=True))
        os.replace(temporary, self.path)
