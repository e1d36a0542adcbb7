"""The `fiberbench` command line: help on every level, flags spelled as the Hugging Face scripts spell them."""

import re
import subprocess
from pathlib import Path

import pytest

from fiberbench.cli import COMMANDS, MAX_DEFAULT_WORKERS, default_num_workers, main
from fiberbench.training.train import main as train

from .processes import modules_loaded

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_top_level_help_lists_every_subcommand():
    result = subprocess.run(["fiberbench", "--help"], check=True, capture_output=True, text=True)
    for name in COMMANDS:
        assert name in result.stdout


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_subcommand_has_help_with_underscored_flags(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    help_text = capsys.readouterr().out
    assert help_text.startswith(f"usage: fiberbench {command}")
    flags = set(re.findall(r"--[a-z][a-z0-9_-]*", help_text))
    assert flags, f"{command} has no flags"
    assert not [flag for flag in flags if "-" in flag[2:]], f"{command}: flags must use underscores"


def test_an_unknown_subcommand_is_an_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["no-such-command"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_a_user_error_is_one_line_naming_the_file(tmp_path):
    missing = tmp_path / "missing.json"
    result = subprocess.run(["fiberbench", "agreement", str(missing)], capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [f"fiberbench agreement: error: {missing}: No such file or directory"]


def test_debug_shows_the_traceback(tmp_path):
    result = subprocess.run(
        ["fiberbench", "--debug", "agreement", str(tmp_path / "missing.json")], capture_output=True, text=True
    )
    assert result.returncode != 0 and "Traceback" in result.stderr


@pytest.mark.parametrize(
    "argv",
    [["evaluate", "--num_bootstrap", "many", "x.jsonl"], ["blank"], ["no-such-command"], ["stats", "--batch_size"]],
)
def test_a_bad_flag_is_one_line_with_exit_status_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and ": error: " in lines[0] and "--help" in lines[0]


def test_a_user_error_of_any_length_is_one_short_line(capsys):
    """A message quoting a huge input (a 10 MB field, a deep YAML value) is cut: the line stays readable."""
    from fiberbench.errors import DataError, run_reporting_errors

    def fail():
        raise DataError("data.json: record 3: field 'label': " + repr("lol " * 2_500_000))

    assert run_reporting_errors(fail, prog="fiberbench x") == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("fiberbench x: error: data.json: record 3: field 'label': 'lol lol")
    assert line.endswith(" [... 10,000,038 characters in all]") and len(line) < 1100


BLANKED = "dataset_script/fiber/sample/val.json"


@pytest.mark.parametrize(
    "entry, argv, message",
    [
        ("fiberbench", ["agreement", "nope.json"], "nope.json: No such file or directory"),
        ("fiberbench", ["agreement", BLANKED, "--answers_files", "nope.csv"], "nope.csv: No such file or directory"),
        ("fiberbench", ["blank", "nope.json", "--output_file", "{tmp}/b.json"], "nope.json: No such file or directory"),
        ("fiberbench", ["answers", "--blanked_files", BLANKED, "--answers_files", "nope.csv", "--output_dir", "{tmp}/a"],
         "nope.csv: No such file or directory"),
        ("fiberbench", ["stats", "nope.json", "--output_dir", "{tmp}/s"], "nope.json: No such file or directory"),
        ("fiberbench", ["hit-inputs", "nope.json", "--output_file", "{tmp}/h.csv"], "nope.json: No such file or directory"),
        ("fiberbench", ["evaluate", "nope.jsonl"], "nope.jsonl: No such file or directory"),
        ("fiberbench", ["predict", "--model_name_or_path", "./nope", "--output_file", "{tmp}/p.jsonl"],
         "--model_name_or_path ./nope: no such folder (and not a Hub model id)"),
        ("train.py", ["--config", "nope.yaml"], "--config nope.yaml: no such file"),
        ("train.py", ["--resume_from_checkpoint", "nope/step_1"], "--resume_from_checkpoint nope/step_1: no such checkpoint"),
        ("train.py", ["--dataset_name", "./nope", "--output_dir", "{tmp}/t"], "--dataset_name ./nope: no such folder"),
        ("train.py", ["--model_name_or_path", "./nope", "--output_dir", "{tmp}/t"],
         "--model_name_or_path ./nope: no such folder (and not a Hub model id)"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else value if value in ("fiberbench", "train.py") else "",
)
def test_a_missing_input_is_one_line(tmp_path, monkeypatch, capfd, entry, argv, message):
    monkeypatch.chdir(REPO_ROOT)
    status = {"fiberbench": main, "train.py": train}[entry]([argument.format(tmp=tmp_path) for argument in argv])
    error = capfd.readouterr().err
    assert status in (1, 2) and len(error.strip().splitlines()) == 1, error
    assert message in error


HELP = "import contextlib\nfrom fiberbench.cli import main\nwith contextlib.suppress(SystemExit):\n    main(['--help'])\n"


def test_the_top_level_help_loads_no_command(tmp_path):
    """`fiberbench --help` imports no command module, so none of their libraries (bench/cli.py times it)."""
    loaded, result = modules_loaded(HELP, ["torch", "transformers",
                                    "datasets", "spacy", "evaluate"], cwd=REPO_ROOT)
    assert loaded == [] and "usage: fiberbench" in result.stdout


def test_version_is_the_installed_packages(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"fiberbench {version('fiber-benchmark')}\n"


def test_default_workers_leave_a_core_for_the_model():
    assert 0 <= default_num_workers(1) <= MAX_DEFAULT_WORKERS
    assert default_num_workers(10_000) == 0
