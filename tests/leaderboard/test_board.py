"""The board's figures: `fiberbench evaluate`'s to the last digit, rank intervals that agree with the paired test,
Holm's correction, and submissions refused in one line and stored nowhere."""

import json
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fiberbench.cli import main
from fiberbench.errors import DataError
from fiberbench.leaderboard.src.display import table_rows
from fiberbench.leaderboard.src.populate import LocalStore, compute_board, holm, rank_intervals, read_entries
from fiberbench.metric.evaluate.predictions import load_split
from fiberbench.leaderboard.src.submission import Refused, check_metadata, submit

from .conftest import FLAGS, SETTINGS


@pytest.fixture(scope="module")
def split():
    return load_split(None, "text", "test")


def metadata(name: str) -> dict:
    return check_metadata(name, "https://example.org/system", "video", "8 frames as a video", 8, "the reply as it is")


@pytest.fixture(scope="module")
def board(split, predictions_files, tmp_path_factory):
    store = LocalStore(tmp_path_factory.mktemp("store"))
    for name, path in predictions_files.items():
        submit(split, SETTINGS, store, path, metadata(name), path.name)
    return store, compute_board(split, SETTINGS, read_entries(store.folder, "test"))


def test_the_board_is_what_fiberbench_evaluate_gives_for_the_same_files(board, predictions_files, tmp_path):
    store, computed = board
    files = [str(path) for path in predictions_files.values()]
    output = tmp_path / "evaluation"
    assert main(["evaluate", *files, "--names", *predictions_files, "--with_baselines", "--output_dir", str(output),
                 *FLAGS]) == 0
    evaluated = json.loads((output / "results.json").read_text())
    for section in ("systems", "baselines", "comparisons", "settings", "dataset"):
        ours, theirs = computed["results"][section], evaluated[section]
        if section == "systems":  # the file is where each one is stored
            ours = {name: {**row, "file": None} for name, row in ours.items()}
            theirs = {name: {**row, "file": None} for name, row in theirs.items()}
        assert ours == theirs, section
    # Each stored results.json is evaluate's for that file alone.
    for metadata, predictions in read_entries(store.folder, "test"):
        name = metadata["system"]
        alone = tmp_path / f"alone {name}"
        assert main(["evaluate", str(predictions_files[name]), "--names", name, "--output_dir", str(alone), *FLAGS]) == 0
        expected = json.loads((alone / "results.json").read_text())["systems"][name]
        stored = json.loads((predictions.parent / "results.json").read_text())["systems"][name]
        assert {**stored, "file": None} == {**expected, "file": None}


def test_rank_intervals_overlap_where_the_paired_test_finds_no_difference_and_only_there(board):
    _, computed = board
    assert computed["rank_intervals"] == {"best": (1, 1), "tied A": (2, 3), "tied B": (2, 3)}
    intervals = computed["rank_intervals"]
    for comparison, adjusted in zip(computed["results"]["comparisons"], computed["holm_p_values"]):
        if comparison["metric"] != "f1":
            continue
        (a_low, a_high), (b_low, b_high) = (intervals[name] for name in comparison["systems"])
        overlap = a_low <= b_high and b_low <= a_high
        assert overlap == (adjusted >= 0.05), comparison
    rows = table_rows(computed)
    assert [(row[0], row[1], row[2]) for row in rows if row[0] != "baseline"] == [
        ("1", "1", "best"), ("2", "2-3", "tied A"), ("3", "2-3", "tied B")
    ]


def test_rank_intervals_follow_the_resamples():
    scores = np.random.default_rng(0).choice([0.0, 100.0], size=(200, 3), p=[0.5, 0.5])
    scores[:, 0] = 100.0  # the first is right everywhere: first in every resample
    intervals = rank_intervals({"a": scores[:, 0], "b": scores[:, 1], "c": scores[:, 2]}, 0.95, 500, 1)
    assert intervals["a"] == (1, 1)
    assert intervals["b"][0] >= 2 and intervals["c"][0] >= 2


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=12), st.floats(0.001, 0.2))
def test_holm_rejects_what_its_definition_rejects(p_values, level):
    """Holm's procedure: sort the m p-values; reject H_(1..k) for the largest k with p_(j) <= level / (m - j + 1) for
    every j <= k (the step-down test), and nothing else."""
    order = sorted(range(len(p_values)), key=lambda index: p_values[index])
    rejected = set()
    for step, index in enumerate(order):
        if p_values[index] > level / (len(p_values) - step):
            break
        rejected.add(index)
    adjusted = holm(p_values)
    assert {index for index, value in enumerate(adjusted) if value <= level * (1 + 1e-12)} >= rejected
    assert {index for index, value in enumerate(adjusted) if value <= level * (1 - 1e-12)} <= rejected
    assert all(value >= p for value, p in zip(adjusted, p_values)) and max(adjusted) <= 1


@pytest.mark.parametrize(("bad", "name", "message"), [
    ("other split", "fine", r"not in the test split of the bundled sample, but in its validation split"),
    ("missing", "fine", r"no prediction for 1 of the 60 blanks"),
    ("extra", "fine", r"line 61: blank \('zzzzzzzzzzz'.* is not in the test split"),
    ("not json", "fine", r"not_json\.jsonl: line 1: invalid JSON"),
    ("too large", "fine", r"too_large\.json: 50\.\d MB, more than the 20 MB a submission may be"),
    (None, "<script>alert(1)</script>", r"system name: '<' is not allowed"),
    (None, "best", r"'best' is on the board already"),
])
def test_a_bad_submission_is_refused_in_one_line_and_stored_nowhere(board, split, bad_files, predictions_files,
                                                                     bad, name, message):
    store, _ = board
    before = sorted(path.relative_to(store.folder) for path in store.folder.rglob("*"))
    path = bad_files[bad] if bad else predictions_files["tied A"]
    with pytest.raises(Refused, match=message) as refusal:
        submit(split, SETTINGS, store, path, metadata(name), path.name)
    assert "\n" not in str(refusal.value) and str(path.parent) not in str(refusal.value)
    assert sorted(path.relative_to(store.folder) for path in store.folder.rglob("*")) == before


def test_two_submissions_at_once_are_both_kept(split, predictions_files, tmp_path):
    store = LocalStore(tmp_path / "store")
    store.create()
    seen = store.head("test")  # both people saw the board empty
    threads = [
        threading.Thread(target=submit, args=(split, SETTINGS, store, predictions_files[name], metadata(name), name, seen))
        for name in ("tied A", "tied B")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(metadata["system"] for metadata, _ in read_entries(store.folder, "test")) == ["tied A", "tied B"]


def test_a_submission_still_being_written_is_not_read_yet(split, predictions_files, tmp_path):
    # What a reader met when another submission's staging folder had no metadata.json yet.
    store = LocalStore(tmp_path / "store")
    submit(split, SETTINGS, store, predictions_files["best"], metadata("best"), "best")
    head = store.head("test")
    staging = store.folder / "submissions" / "test" / ".next.tmp-1-x"  # as `fiberbench.outputs.atomic_folder` names it
    staging.mkdir()
    (staging / "predictions.jsonl").write_text("{}\n", encoding="utf-8")
    assert [metadata["system"] for metadata, _ in read_entries(store.folder, "test")] == ["best"]
    assert store.head("test") == head


def test_a_link_among_the_submissions_is_refused_not_followed(split, predictions_files, tmp_path):
    store = LocalStore(tmp_path / "store")
    submit(split, SETTINGS, store, predictions_files["best"], metadata("best"), "best")
    (original,) = (store.folder / "submissions" / "test").iterdir()
    planted = store.folder / "submissions" / "test" / "planted"
    planted.symlink_to(original, target_is_directory=True)
    with pytest.raises(DataError, match=r"planted: a link, not a submission folder of the store's own; remove it"):
        read_entries(store.folder, "test")
