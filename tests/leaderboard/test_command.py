"""`fiberbench leaderboard` on a local store: several systems in one call, each with its own metadata (all or none),
an existing board updated without asking, and the Space folder holding only the store's own files."""

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
                       "--video_input", "features", "--verified", "--add", predictions_files["tied B"], "--name", "B",
                       "--parameters", "7B", "--open_weights", "yes") == 0
    assert [line for line in capsys.readouterr().out.splitlines() if line.startswith("Added")] == [
        f"Added A to the results folder {tmp_path / 'store'}", f"Added B to the results folder {tmp_path / 'store'}"]
    metadata = stored(tmp_path)
    assert {name: (entry["kind"], entry["video_input"], entry["verified"], entry["parameters"], entry["open_weights"])
            for name, entry in metadata.items()} == {"A": ("fiber", "features", True, None, None),
                                                      "B": ("other", None, False, 7_000_000_000, "yes")}
    # The normal case: one more system on the same board, no --overwrite_output_dir.
    assert leaderboard(tmp_path, "--add", predictions_files["best"], "--name", "C") == 0
    config = json.loads((tmp_path / "space" / "leaderboard.json").read_text())
    assert config["submissions_per_day"] == 5 and len(stored(tmp_path)) == 3


@pytest.mark.parametrize(("args", "line"), [
    (["--name", "A", "--add", "FILE"], "--name describes a system: give it after that system's --add"),
    (["--add", "FILE", "--name", "A", "--name", "B"], "--name given twice for --add FILE"),
    (["--add", "FILE"], "--add FILE: give its --name after it"),
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


def test_a_link_in_a_local_store_is_not_copied_into_the_space(predictions_files, tmp_path, capsys):
    assert leaderboard(tmp_path, "--add", predictions_files["best"], "--name", "A") == 0
    secret = tmp_path / "secret.txt"
    secret.write_text("the answers")
    (folder,) = (tmp_path / "store" / "submissions" / "test").iterdir()
    (folder / "notes.txt").symlink_to(secret)
    assert leaderboard(tmp_path) == 0
    copied = [path for path in (tmp_path / "space" / "results").rglob("*") if path.is_file()]
    assert sorted(path.name for path in copied) == ["metadata.json", "predictions.jsonl", "results.json"]
    assert not any(path.is_symlink() for path in copied)
    (folder / "results.json").unlink()
    (folder / "results.json").symlink_to(secret)
    assert leaderboard(tmp_path) == 1
    assert "results.json: a link, not a file of the store's own; remove it" in capsys.readouterr().err
