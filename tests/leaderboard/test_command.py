"""`fiberbench leaderboard` on a local store: several systems in one call, each with its own metadata (all or none),
an existing board updated without asking, and the store read where it is, never copied into the Space folder."""

import json

import pytest

from fiberbench.cli import main

from .conftest import FLAGS


def leaderboard(tmp_path, *args) -> int:
    try:
        return main(["leaderboard", "--results_dir", str(tmp_path / "store"), "--output_dir", str(tmp_path / "space"),
                     *FLAGS, *map(str, args)])
    except SystemExit as exit:  # argparse's refusals
        return exit.code


def stored(tmp_path) -> dict[str, dict]:
    metadata = [json.loads(path.read_text()) for path in (tmp_path / "store").glob("submissions/test/*/metadata.json")]
    return {entry["system"]: entry for entry in metadata}


def test_several_adds_in_one_call_each_keep_their_own_metadata(predictions_files, tmp_path, capsys):
    assert leaderboard(tmp_path, "--add", predictions_files["tied A"], "--name", "A", "--kind", "fiber",
                       "--video_input", "features", "--verified", "--control", predictions_files["tied B"], "--add",
                       predictions_files["tied B"], "--name", "B", "--parameters", "7B", "--open_weights", "yes") == 0
    assert [line for line in capsys.readouterr().out.splitlines() if line.startswith("Added")] == [
        f"Added A to the results folder {tmp_path / 'store'}", f"Added B to the results folder {tmp_path / 'store'}"]
    assert {name: (entry["kind"], entry["video_input"], entry["verified"], entry["parameters"], entry["open_weights"],
                   entry.get("control")) for name, entry in stored(tmp_path).items()} == {
        "A": ("fiber", "features", True, None, None, "control.jsonl"), "B": ("other", None, False, 7e9, "yes", None)}
    # The normal case: one more system on the same board, no --overwrite_output_dir.
    assert leaderboard(tmp_path, "--add", predictions_files["best"], "--name", "C") == 0
    config = json.loads((tmp_path / "space" / "leaderboard.json").read_text())
    assert config["submissions_per_day"] == 5 and len(stored(tmp_path)) == 3


@pytest.mark.parametrize(("args", "line"), [
    (["--name", "A", "--add", "FILE"], "--name describes a system: give it after that system's --add"),
    (["--add", "FILE", "--name", "A", "--name", "B"], "--name given twice for --add FILE"),
    (["--add", "FILE"], "--add FILE: give its --name after it"),
    (["--add", "FILE", "--name", "A", "--control", "NOPE"], "--control NOPE: no such file"),
    (["--add", "FILE", "--name", "A", "--add", "BAD", "--name", "B"], "--add BAD: BAD: line 1: invalid JSON"),
    (["--add", "FILE", "--name", "A", "--add", "FILE", "--name", "a"], "'a' is on the board already"),
    (["--add", "FILE", "--name", "A", "--frames", "abc"], "frames per clip: 'abc' is not a whole number"),
])
def test_a_refused_add_stores_nothing_of_the_call(predictions_files, bad_files, tmp_path, capsys, args, line):
    files = {"FILE": str(predictions_files["best"]), "BAD": str(bad_files["not json"])}
    assert leaderboard(tmp_path, *(files.get(arg, arg) for arg in args)) == 2
    error = capsys.readouterr().err.splitlines()[-1]  # after the sample's SYNTHETIC warning
    assert line.replace("FILE", files["FILE"]).replace("BAD", files["BAD"]) in error
    assert not stored(tmp_path) and not (tmp_path / "space").exists()


def test_a_mistyped_results_dir_is_refused_not_an_empty_board(tmp_path, capsys):
    assert leaderboard(tmp_path) == 2
    assert f"--results_dir {tmp_path / 'store'}: not a store (no submissions/ folder in it)" in capsys.readouterr().err


def test_a_local_store_is_read_where_it_is_and_never_copied_into_the_space(predictions_files, tmp_path, capsys):
    assert leaderboard(tmp_path, "--add", predictions_files["best"], "--name", "A") == 0
    config = json.loads((tmp_path / "space" / "leaderboard.json").read_text())
    assert config["results_dir"] == str((tmp_path / "store").resolve())
    assert sorted(path.name for path in (tmp_path / "space").iterdir() if not path.name.startswith(".")) == [
        "README.md", "app.py", "fiberbench_output.json", "leaderboard.json", "requirements.txt", "src"]
    assert leaderboard(tmp_path, "--push_to_hub", "org/space") == 2
    assert f"--push_to_hub: the Space on the Hub cannot read the local folder {tmp_path / 'store'}" in (
        capsys.readouterr().err)
