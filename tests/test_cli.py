"""The `fiberbench` command line: help on every level, flags spelled as the Hugging Face scripts spell them."""

import re
import subprocess

import pytest

from fiberbench.cli import COMMANDS, main


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
