"""The board's figures: `fiberbench evaluate`'s to the last digit, rank intervals that agree with the paired test,
Holm's correction, and submissions refused in one line and stored nowhere."""

import json
import os
import re
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fiberbench.cli import main
from fiberbench.leaderboard.src.display import columns, table_rows
from fiberbench.leaderboard.src.metadata import Refused, name_key
from fiberbench.leaderboard.src.populate import Board, LocalStore, holm, rank_intervals
from fiberbench.leaderboard.src.submission import DailyLimit, submit
from fiberbench.metric.evaluate.predictions import load_split

from .conftest import FLAGS, SETTINGS


@pytest.fixture(scope="module")
def split():
    return load_split(None, "text", "test")


def fields(name: str, **more) -> dict:
    return {"system": name, "link": "https://example.org/system", "kind": "video", "video_input": "frames",
            "frames": "8", "answer_reading": "the reply as it is", **more}


def read_board(split, store) -> dict:
    return Board(split, SETTINGS).update(*store.read("test", store.head("test")))


@pytest.fixture(scope="module")
def board(split, predictions_files, tmp_path_factory):
    store = LocalStore(tmp_path_factory.mktemp("store"))
    for name, path in predictions_files.items():
        submit(split, SETTINGS, store, path, fields(name), path.name)
    return store, read_board(split, store)


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
    for entry in store.read("test", store.head("test"))[0]:
        alone = tmp_path / f"alone {entry.name}"
        assert main(["evaluate", str(predictions_files[entry.name]), "--names", entry.name, "--output_dir", str(alone),
                     *FLAGS]) == 0
        expected = json.loads((alone / "results.json").read_text())["systems"][entry.name]
        stored = json.loads((entry.path.parent / "results.json").read_text())["systems"][entry.name]
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


def test_the_columns_say_how_each_system_was_run_and_the_filters_keep_the_baselines(board, split, tmp_path,
                                                                                    predictions_files):
    _, computed = board
    shown = columns(computed)
    row = dict(zip(shown, table_rows(computed)[0]))
    assert {key: row[key] for key in ("system", "verified", "kind", "video input", "run with", "link")} == {
        "system": "best", "verified": "self-reported", "kind": "video", "video input": "8 frames",
        "run with": "other", "link": "https://example.org/system"}
    assert "F1, release's" not in shown  # evaluate's results carry no f1_release yet
    assert [row[2] for row in table_rows(computed, kind="fiber")] == [
        "human agreement (baseline)", 'most frequent answer "a guitar" (baseline)']
    store = LocalStore(tmp_path / "store")
    submit(split, SETTINGS, store, predictions_files["best"], fields(
        "open", parameters="7B", open_weights="yes", video_input="fps", fps="2", frames="64", verified=True), "x.jsonl")
    submit(split, SETTINGS, store, predictions_files["tied A"], fields("closed", open_weights="no"), "y.jsonl")
    computed = read_board(split, store)
    rows = {row[2]: dict(zip(columns(computed), row)) for row in table_rows(computed, open_weights="yes")}
    assert set(rows) == {"open", "human agreement (baseline)", 'most frequent answer "a guitar" (baseline)'}
    assert (rows["open"]["parameters (B)"], rows["open"]["video input"], rows["open"]["verified"]) == (
        7.0, "2 fps, at most 64 frames", "✓ verified")
    assert [row[2] for row in table_rows(computed, video_input="fps") if row[0] != "baseline"] == ["open"]


def test_where_evaluate_gives_the_releases_f1_the_board_shows_it_beside_the_paper(board):
    _, computed = board
    results = {**computed["results"], "systems": {name: {**row, "f1_release": row["f1"] + 2.04}
                                                  for name, row in computed["results"]["systems"].items()}}
    computed = {**computed, "results": results}
    shown = columns(computed)
    rows = {row[2]: dict(zip(shown, row)) for row in table_rows(computed)}
    assert rows["tied A"]["F1, release's"] == 40.4 and rows["human agreement (baseline)"]["F1, release's"] is None


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


@pytest.mark.parametrize(("bad", "given", "message"), [
    ("other split", {}, r"not in the test split of the bundled sample, but in its validation split"),
    ("missing", {}, r"no prediction for 1 of the 60 blanks"),
    ("extra", {}, r"line 61: blank \('zzzzzzzzzzz'.* is not in the test split"),
    ("not json", {}, r"not_json\.jsonl: line 1: invalid JSON"),
    ("too large", {}, r"too_large\.json: 50\.\d MB, more than the 20 MB a submission may be"),
    ("long line", {}, r"long_line\.jsonl: line 1: 131,\d+ characters, more than 65,536"),
    ("deep line", {}, r"deep_line\.jsonl: JSON nested 30,001 deep, more than 16"),
    ("deep array", {}, r"deep_array\.json: JSON nested 22 deep, more than 16"),
    ("many columns", {}, r"many_columns\.csv: 1,000 columns in its header, more than 32"),
    ("long answer", {}, r"long_answer\.jsonl: an answer of 1,200 characters, more than 500"),
    ("long value", {}, r"long_value\.jsonl: line 1: field 'candidates' must be a list of strings, got 'xxx.*\[\.\.\. "),
    ("unclosed string", {}, r"unclosed_string\.json: line 1: invalid JSON \(Unterminated string"),
    (None, {"system": "<script>alert(1)</script>"}, r"system name: '<' \(U\+003C\) is not allowed"),
    (None, {"system": "best"}, r"'best' is on the board already"),
    (None, {"system": "ｂｅｓｔ"}, r"'best' is on the board already"),  # fullwidth
    (None, {"system": "tied А"}, r"system name: mixes CYRILLIC and LATIN letters"),  # a Cyrillic A
    (None, {"system": "best\u3164"}, r"system name: '\u1160' \(U\+1160\) is not allowed"),  # an invisible letter
    (None, {"system": "human agreement (baseline)"}, r"is, or looks like, a baseline's or a row of the paper's"),
    (None, {"system": "Human Agreement"}, r"is, or looks like, a baseline's or a row of the paper's"),
    (None, {"system": "T5 + I3D"}, r"is, or looks like, a baseline's or a row of the paper's"),
    (None, {"system": "=WEBSERVICE(x)"}, r"system name: starts with '='; start with a letter or a digit"),
    (None, {"system": "a $\\frac{1}{0}$"}, r"system name: '\$' \(U\+0024\) is not allowed"),
    (None, {"frames": "abc"}, r"frames per clip: 'abc' is not a whole number from 1 to 10,000"),
    (None, {"frames": "0"}, r"frames per clip: '0' is not a whole number from 1 to 10,000"),
    (None, {"parameters": "seven"}, r"parameters: 'seven' is not a whole number"),
    (None, {"open_weights": "maybe"}, r"open weights: 'maybe' is not one of yes, no"),
    (None, {"kind": "lmms-eval"}, r"kind: 'lmms-eval' is not one of fiber, seq2seq, causal, video, other"),
    (None, {"fps": "2"}, r"frames per second: give it with video input 'fps', and only then"),
    (None, {"answer_reading": "-1+1"}, r"answer reading: starts with '-'"),
    (None, {"link": "javascript:alert(1)"}, r"link: 'javascript:alert\(1\)' is not an https:// address"),
])
def test_a_bad_submission_is_refused_in_one_line_and_stored_nowhere(board, split, bad_files, predictions_files,
                                                                     bad, given, message):
    store, _ = board
    before = sorted(path.relative_to(store.folder) for path in store.folder.rglob("*"))
    path = bad_files[bad] if bad else predictions_files["tied A"]
    with pytest.raises(Refused, match=message) as refusal:
        submit(split, SETTINGS, store, path, fields("fine", **given), path.name)
    assert "\n" not in str(refusal.value) and str(path.parent) not in str(refusal.value)
    assert len(str(refusal.value)) < 1100
    assert sorted(path.relative_to(store.folder) for path in store.folder.rglob("*")) == before


def test_look_alike_names_share_a_key():
    assert name_key("ТОР") == name_key("top") == name_key("ＴＯＰ") == name_key("ΤΟΡ")  # Cyrillic, fullwidth, Greek
    assert name_key("T5  +\tI3D") == name_key("t5 + i3d") != name_key("t5 + 13d")


def test_logged_samples_of_the_task_with_its_version_and_settings_are_marked_verified(split, sample_splits, tmp_path):
    from fiberbench.outputs import write_jsonl

    from .conftest import prediction_rows

    reader = {"reader": "fiberbench.predict.replies.read_answer", "version": 2}
    samples = [{"doc_id": index, **row, "task": {"name": "fiber_test", "version": "1.0"}, "reader": reader}
               for index, row in enumerate(prediction_rows(sample_splits["test"], lambda index: index % 2))]
    store = LocalStore(tmp_path / "store")
    for name, rows in {"logged": samples, "edited": [*samples[:-1], {**samples[-1], "task": None}]}.items():
        write_jsonl(tmp_path / f"{name}.jsonl", rows)
        submit(split, SETTINGS, store, tmp_path / f"{name}.jsonl", fields(name), f"{name}.jsonl")
    computed = read_board(split, store)
    shown = {row[2]: dict(zip(columns(computed), row)) for row in table_rows(computed)}
    assert (shown["logged"]["verified"], shown["logged"]["run with"]) == ("✓ verified", "lmms-eval, task 1.0")
    assert (shown["edited"]["verified"], shown["edited"]["run with"]) == ("self-reported", "other")


def test_two_submissions_at_once_are_both_kept(split, predictions_files, tmp_path):
    store = LocalStore(tmp_path / "store")
    store.create()
    seen = store.head("test")  # both people saw the board empty
    threads = [
        threading.Thread(target=submit, args=(split, SETTINGS, store, predictions_files[name], fields(name), name, seen))
        for name in ("tied A", "tied B")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(entry.name for entry in store.read("test", "")[0]) == ["tied A", "tied B"]


def test_a_submission_still_being_written_is_not_read_yet(split, predictions_files, tmp_path):
    # What a reader met when another submission's staging folder had no metadata.json yet.
    store = LocalStore(tmp_path / "store")
    submit(split, SETTINGS, store, predictions_files["best"], fields("best"), "best")
    head = store.head("test")
    staging = store.folder / "submissions" / "test" / ".next.tmp-1-x"  # as `fiberbench.outputs.atomic_folder` names it
    staging.mkdir()
    (staging / "predictions.jsonl").write_text("{}\n", encoding="utf-8")
    assert [entry.name for entry in store.read("test", "")[0]] == ["best"] and store.head("test") == head


def edit_metadata(folder, **changes):
    path = folder / "metadata.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


# An edited store: each submission that cannot be shown is one line under the board, and the others are shown.
@pytest.mark.parametrize(("edit", "line"), [
    (lambda folder: edit_metadata(folder, frames="abc"), r"metadata.json: frames per clip: 'abc' is not a whole"),
    (lambda folder: edit_metadata(folder, predictions="../../../../etc/passwd"),
     r"metadata.json: field 'predictions': '../../../../etc/passwd' is not predictions"),
    (lambda folder: edit_metadata(folder, predictions="/etc/passwd"), r"'predictions': '/etc/passwd' is not predictions"),
    (lambda folder: edit_metadata(folder, system="human agreement (baseline)"), r"looks like, a baseline's"),
    (lambda folder: (folder / "metadata.json").write_text("[" * 10_000), r"metadata.json: not readable JSON"),
    (lambda folder: (folder / "predictions.jsonl").write_text("{}\n"), r"changed since it was scored"),
    (lambda folder: ((folder / "predictions.jsonl").unlink(), (folder / "predictions.jsonl").symlink_to("/etc/hosts")),
     r"predictions.jsonl: not a file of the store's own"),
    (lambda folder: (folder.parent / "planted").symlink_to(folder, target_is_directory=True),
     r"planted: a link, not a submission folder of the store's own; remove it"),
])
def test_an_edited_store_shows_what_it_can_and_says_what_it_cannot_in_one_line(split, predictions_files, tmp_path,
                                                                                edit, line):
    store = LocalStore(tmp_path / "store")
    for name in ("best", "tied A"):
        submit(split, SETTINGS, store, predictions_files[name], fields(name), name)
    edit(sorted((store.folder / "submissions" / "test").iterdir())[-1])
    computed = read_board(split, store)
    (problem,) = computed["problems"]
    assert "\n" not in problem and re.search(line, problem) and str(tmp_path) not in problem, problem
    assert "best" in computed["metadata"]


def test_two_stored_submissions_of_one_name_are_both_shown(split, predictions_files, tmp_path):
    store = LocalStore(tmp_path / "store")
    for name in ("best", "tied A"):
        submit(split, SETTINGS, store, predictions_files[name], fields(name), name)
    first, second = sorted((store.folder / "submissions" / "test").iterdir())
    edit_metadata(second, system="ＢＥＳＴ")  # stored by another replica, or by hand
    names = [row[2] for row in table_rows(read_board(split, store)) if row[0] != "baseline"]
    assert names == ["best", f"BEST ({second.name})"]


def test_a_submitter_may_send_a_few_a_day():
    limit = DailyLimit(2)
    limit.take("a"), limit.take("a"), limit.take("b")
    with pytest.raises(Refused, match=r"2 submissions a day \(UTC\) at most from each submitter"):
        limit.take("a")


def resident_mb() -> float:
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.slow
def test_a_hundred_submissions_after_the_first_ten_cost_what_the_first_did(split, sample_splits, tmp_path):
    """Each submission is scored once, in a child process, and only its own pairs are compared: the time of a
    submission stays flat as the board grows (the board's update grows by one pair per system on it), and memory
    comes back after a refused one. The figures are printed (pytest -s)."""
    from fiberbench.outputs import write_jsonl

    from .conftest import prediction_rows

    store, board, rng = LocalStore(tmp_path / "store"), Board(split, SETTINGS), np.random.default_rng(0)
    timings = []
    for number in range(110):
        right = set(rng.choice(60, size=int(rng.integers(5, 55)), replace=False).tolist())
        path = tmp_path / f"system_{number}.jsonl"
        write_jsonl(path, prediction_rows(sample_splits["test"], lambda index: index in right))
        start = time.perf_counter()
        submit(split, SETTINGS, store, path, fields(f"system {number}"), path.name)
        stored = time.perf_counter()
        board.update(*store.read("test", ""))
        timings.append((stored - start, time.perf_counter() - stored, resident_mb()))
    before = resident_mb()
    with pytest.raises(Refused):
        submit(split, SETTINGS, store, path, fields("system 0"), path.name)
    refused = resident_mb()
    print("\n| submissions | systems | submit s (mean) | board update s (mean) | resident MB after |")
    blocks = [timings[start:start + 10] for start in range(0, 110, 10)]
    for index, block in enumerate(blocks):
        submit_s, update_s, resident = (np.mean(column) for column in zip(*block))
        print(f"| {10 * index + 1}-{10 * index + 10} | {10 * index + 10} | {submit_s:.3f} | {update_s:.3f} | "
              f"{block[-1][2]:.0f} |")
    print(f"a refused submission: resident {before:.1f} MB before, {refused:.1f} MB after")
    first, last = (np.mean([timing[0] for timing in block]) for block in (blocks[0], blocks[-1]))
    assert last < 3 * first and refused - before < 1
    assert timings[-1][2] - timings[9][2] < 50  # the board's own figures for 100 more systems, not their files
