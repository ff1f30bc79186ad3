"""posnet_fairseq/table_runs/plancheck.py: a recipe's plan is checked (arch, mixers, flags) before anything runs."""
import os

from posnet_fairseq.table_runs import plancheck


def test_train_commands_found_in_plans():
    plan = "\n".join([
        "# row a ds", "fairseq-train /d --arch x --lr 1 --log-file /x",
        "# row b ds", "python -m posnet_fairseq.table_runs.launch --procs 2 -- fairseq-train /d --arch y",
        "# row c ds", "torchrun --nnodes 2 -m fairseq_cli.train /d --arch z",
        "fairseq-generate /d --path p > out",
    ])
    found = plancheck.train_commands(plan)
    assert [(r, d, a[:3]) for r, d, a in found] == [
        ("a", "ds", ["/d", "--arch", "x"]), ("b", "ds", ["/d", "--arch", "y"]), ("c", "ds", ["/d", "--arch", "z"])]


def test_plancheck_names_missing_arch_mixer_and_bad_flag():
    user = ["--user-dir", os.path.dirname(plancheck.__file__).rsplit(os.sep, 1)[0]]
    assert plancheck.check_command(["/d", "--arch", "posnet_transformer_tiny"] + user) == []
    assert plancheck.check_command(["/d", "--arch", "no_such_arch_xyz"] + user) == [
        "architecture no_such_arch_xyz is not registered"]
    assert "mixer nosuchmixer is not registered" in plancheck.check_command(
        ["/d", "--arch", "posnet_transformer_tiny", "--encoder-self-mixer", "mha,nosuchmixer"] + user)[0]
    problems = plancheck.check_command(["/d", "--arch", "posnet_transformer_tiny", "--no-such-flag"] + user)
    assert problems and "--no-such-flag" in problems[0]
    bad = plancheck.check_plan("# row r x\nfairseq-train /d --arch no_such_arch_xyz " + " ".join(user))
    assert plancheck.report(bad).startswith("missing architecture(s): no_such_arch_xyz")


def test_plancheck_reads_flag_equals_value_and_takes_a_flag_without_its_value_as_missing(capsys):
    """The flags are read as fairseq-train's argparse reads them (troubleshooting.option), ``--arch=NAME`` too;
    a flag given without its value is missing, and the check says so, printing nothing of argparse's error."""
    user = ["--user-dir", os.path.dirname(plancheck.__file__).rsplit(os.sep, 1)[0]]
    assert plancheck.check_command(["/d", "--arch=posnet_transformer_tiny"] + user) == []
    assert plancheck.check_command(["/d", "--arch=no_such_arch_xyz"] + user) == [
        "architecture no_such_arch_xyz is not registered"]
    assert "mixer nosuchmixer is not registered" in plancheck.check_command(
        ["/d", "--arch", "posnet_transformer_tiny", "--encoder-self-mixer=mha,nosuchmixer"] + user)[0]
    assert plancheck.check_command(["/d", *user, "--arch"]) == ["no --arch"]
    assert plancheck.check_command(["/d", "--arch", "--lr", "1", *user]) == ["no --arch"]
    assert plancheck.check_command(["/d", "--user-dir", "--arch", "posnet_transformer_tiny"]) == [
        "no --user-dir: fairseq cannot find the plugin's architectures"]
    assert capsys.readouterr().err == ""
