"""The board's figures: `fiberbench evaluate`'s to the last digit, rank intervals coherent with Holm's corrected
comparisons on a near-tie, the columns researchers filter by, and submissions refused in one line and stored nowhere."""

import json
import re
import threading

import pytest

from fiberbench.cli import main
from fiberbench.leaderboard.src import populate
from fiberbench.leaderboard.src.display import COLUMNS, pairwise_html, table_rows
from fiberbench.leaderboard.src.metadata import Refused, name_key
from fiberbench.leaderboard.src.populate import Board, LocalStore
from fiberbench.leaderboard.src.submission import DailyLimit, submit
from fiberbench.metric.evaluate.predictions import load_split
from fiberbench.outputs import write_jsonl
from fiberbench.records import KEY_FIELDS

from .conftest import FLAGS, SETTINGS, prediction_rows, tied_a


@pytest.fixture(scope="module")
def split():
    return load_split(None, "text", "test")


def fields(name: str, **more) -> dict:
    return {"system": name, "link": "https://example.org/system", "kind": "video", "video_input": "frames",
            "frames": "8", "answer_reading": "the reply as it is", **more}


def read_board(split, store) -> dict:
    return Board(split, SETTINGS).update(*store.read("test", store.head("test")))


@pytest.fixture(scope="module")
def board(split, predictions_files, worst_file, tmp_path_factory):
    """Issue 47's five systems (one clearly best, a near-tie, a tied pair, one clearly worst); "best" sent with "tied
    B"'s file as its blind control."""
    store = LocalStore(tmp_path_factory.mktemp("store"))
    for name, path in {**predictions_files, "worst": worst_file}.items():
        control = (predictions_files["tied B"], "control.jsonl") if name == "best" else None
        submit(split, SETTINGS, store, path, fields(name), path.name, control=control)
    return store, read_board(split, store)


def unfiled(systems: dict) -> dict:
    """The systems' rows less where their files (and their controls) are kept."""
    rows = {name: {**row, "file": None} for name, row in systems.items()}
    for row in rows.values():
        if "video_gain" in row:
            row["video_gain"] = {**row["video_gain"], "control": None}
    return rows


def evaluated(files: dict, control, output, *more) -> dict:
    assert main(["evaluate", *map(str, files.values()), "--names", *files, "--control", f"best={control}",
                 "--release_f1", "--output_dir", str(output), *more, *FLAGS]) == 0
    results = json.loads((output / "results.json").read_text())
    return {**results, "systems": unfiled(results["systems"])}


def test_the_board_is_what_fiberbench_evaluate_gives_for_the_same_files(board, predictions_files, worst_file, tmp_path):
    store, computed = board
    files, control = {**predictions_files, "worst": worst_file}, predictions_files["tied B"]
    ours = json.loads(json.dumps(computed["results"]))  # as results.json holds it: lists, not tuples
    ours["systems"] = unfiled(ours["systems"])
    for comparison in ours["comparisons"]:
        assert comparison.pop("blanks") == 60  # each pair on the blanks both answered: here all
    assert ours == evaluated(files, control, tmp_path / "all", "--with_baselines")
    # Each stored results.json is evaluate's for that file (and its control) alone.
    (entry,) = [entry for entry in store.read("test", store.head("test"))[0] if entry.name == "best"]
    stored = json.loads((entry.path.parent / "results.json").read_text())["systems"]
    assert unfiled(stored)["best"] == evaluated({"best": files["best"]}, control, tmp_path / "alone")["systems"]["best"]


def test_rank_intervals_on_a_near_tie_separate_only_what_holms_correction_separates(board):
    _, computed = board
    systems = computed["results"]["systems"]
    assert {name: tuple(row["rank_interval"]) for name, row in systems.items()} == {
        "best": (1, 1), "near": (2, 4), "tied A": (2, 4), "tied B": (2, 4), "worst": (5, 5)}
    f1 = {tuple(c["systems"]): c for c in computed["results"]["comparisons"] if c["metric"] == "f1"}
    assert f1["near", "tied A"]["p_value"] < 0.05 < f1["near", "tied A"]["p_value_holm"]  # the near-tie
    for (a, b), comparison in f1.items():
        (a_low, a_high), (b_low, b_high) = systems[a]["rank_interval"], systems[b]["rank_interval"]
        assert comparison["p_value_holm"] < 0.05 or (a_low <= b_high and b_low <= a_high), (a, b)
    assert [row[:3] for row in table_rows(computed) if row[0] != "baseline"] == [
        ["1", "1", "best"], ["2", "2-4", "near"], ["3", "2-4", "tied A"], ["4", "2-4", "tied B"], ["5", "5", "worst"]]
    matrix = pairwise_html(computed, "f1")
    assert "<td>+6.7 (p 0.0455, Holm 0.1365)</td>" in matrix and "on these 60 blanks" in matrix
    assert "<td><b>+55.0 (p &lt;0.0001, Holm &lt;0.0001)</b></td>" in matrix and "Differences under 2" in matrix


def test_the_columns_say_how_each_system_was_run_and_the_filters_keep_the_baselines(board, split, tmp_path,
                                                                                    predictions_files, sample_splits):
    _, computed = board
    rows = {row[2]: dict(zip(COLUMNS, row)) for row in table_rows(computed)}
    gain = computed["results"]["systems"]["best"]["video_gain"]["f1"]
    assert {key: rows["best"][key] for key in ("verified", "kind", "video input", "run with", "link", "answered",
                                                "VQA accuracy", "F1, release's", "video gain")} == {
        "verified": "self-reported", "kind": "video", "video input": "8 frames", "run with": "other",
        "link": "https://example.org/system", "answered": 60, "VQA accuracy": 91.6, "F1, release's": 100.0,
        "video gain": 61.7}
    assert rows["best"]["video gain interval"] == "[{:+.1f}, {:+.1f}]".format(*gain["gain_ci"]) != "[+0.0, +0.0]"
    assert rows["near"]["video gain"] is None and rows["human agreement (baseline)"]["F1, release's"] is None
    assert [row[0] for row in table_rows(computed, kind="fiber")] == ["baseline", "baseline"]  # always shown
    # A system that lacks the video of eight clips: answered, not wrong, on the others; each pair on both's blanks.
    gaps = [{field: row[field] for field in KEY_FIELDS} | {"missing": True} if index < 8 else row
            for index, row in enumerate(prediction_rows(sample_splits["test"], tied_a))]
    write_jsonl(tmp_path / "gaps.jsonl", gaps)
    store = LocalStore(tmp_path / "store")
    submit(split, SETTINGS, store, predictions_files["best"], fields(
        "open", parameters="7B", open_weights="yes", video_input="fps", fps="2", frames="64", verified=True), "x.jsonl")
    submit(split, SETTINGS, store, tmp_path / "gaps.jsonl", fields("closed", open_weights="no"), "gaps.jsonl")
    computed = read_board(split, store)
    rows = {row[2]: dict(zip(COLUMNS, row)) for row in table_rows(computed, open_weights="yes")}
    assert set(rows) == {"open", "human agreement (baseline)", 'most frequent answer "a guitar" (baseline)'}
    assert (rows["open"]["parameters (B)"], rows["open"]["video input"], rows["open"]["verified"]) == (
        7.0, "2 fps, at most 64 frames", "✓ verified")
    assert [row[2] for row in table_rows(computed, video_input="fps") if row[0] != "baseline"] == ["open"]
    closed = dict(zip(COLUMNS, table_rows(computed, open_weights="no")[1]))
    assert (closed["system"], closed["answered"], closed["F1"]) == ("closed", 52, round(100 * 20 / 52, 1))
    assert "(p &lt;0.0001, Holm &lt;0.0001; on 52 blanks)" in pairwise_html(computed, "f1")


@pytest.mark.parametrize(("bad", "given", "message"), [
    ("other split", {}, r"not in the test split of the bundled sample, but in its validation split"),
    ("missing", {}, r"no prediction for 1 of the 60 blanks"),
    ("not json", {}, r"not_json\.jsonl: line 1: invalid JSON"),
    ("too large", {}, r"too_large\.json: 50\.\d MB, more than the 20 MB a submission may be"),
    ("long line", {}, r"long_line\.jsonl: line 1 is longer than 1,048,576 characters"),
    ("deep line", {}, r"deep_line\.jsonl: line 1: JSON nested more than 64 levels deep"),
    ("many columns", {}, r"many_columns\.csv: the header has 1,000 columns, more than 100"),
    ("long answer", {}, r"long_answer\.jsonl: an answer of 1,200 characters, more than 500"),
    ("long value", {}, r"long_value\.jsonl: line 1: field 'candidates' must be a list of strings, got 'xxx.*\[\.\.\. "),
    ("unclosed string", {}, r"unclosed_string\.json: line 1: invalid JSON \(Unterminated string"),
    (None, {"system": "<script>alert(1)</script>"}, r"system name: '<' \(U\+003C\) is not allowed"),
    (None, {"system": "best"}, r"'best' is on the board already"),
    (None, {"system": "ｂｅｓｔ"}, r"'best' is on the board already"),  # fullwidth
    (None, {"system": "tied А"}, r"system name: mixes CYRILLIC and LATIN letters"),  # a Cyrillic A
    (None, {"system": "best\u3164"}, r"system name: '\u1160' \(U\+1160\) is not allowed"),  # an invisible letter
    (None, {"system": "human agreement (baseline)"}, r"is, or looks like, a baseline's or a row of the paper's"),
    (None, {"system": "T5 + I3D"}, r"is, or looks like, a baseline's or a row of the paper's"),
    (None, {"system": "=WEBSERVICE(x)"}, r"system name: starts with '='; start with a letter or a digit"),
    (None, {"system": "a $\\frac{1}{0}$"}, r"system name: '\$' \(U\+0024\) is not allowed"),
    (None, {"frames": "abc"}, r"frames per clip: 'abc' is not a whole number from 1 to 10,000"),
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


def test_logged_samples_of_the_task_with_its_version_and_settings_are_marked_verified(split, sample_splits, tmp_path):
    reader = {"reader": "fiberbench.predict.replies.read_answer", "version": 2}
    samples = [{"doc_id": index, **row, "task": {"name": "fiber_test", "version": "1.0"}, "reader": reader}
               for index, row in enumerate(prediction_rows(sample_splits["test"], lambda index: index % 2))]
    store = LocalStore(tmp_path / "store")
    for name, rows in {"logged": samples, "edited": [*samples[:-1], {**samples[-1], "task": None}]}.items():
        write_jsonl(tmp_path / f"{name}.jsonl", rows)
        submit(split, SETTINGS, store, tmp_path / f"{name}.jsonl", fields(name), f"{name}.jsonl")
    computed = read_board(split, store)
    shown = {row[2]: dict(zip(COLUMNS, row)) for row in table_rows(computed)}
    assert (shown["logged"]["verified"], shown["logged"]["run with"]) == ("✓ verified", "lmms-eval, task 1.0")
    assert (shown["edited"]["verified"], shown["edited"]["run with"]) == ("self-reported", "other")


def test_two_submissions_at_once_are_both_kept_and_one_being_written_is_not_read_yet(split, predictions_files,
                                                                                     tmp_path):
    store = LocalStore(tmp_path / "store")
    store.create()
    seen = store.head("test")  # both people saw the board empty
    threads = [threading.Thread(target=submit, args=(split, SETTINGS, store, predictions_files[name], fields(name),
                                                     name, seen)) for name in ("tied A", "tied B")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    head = store.head("test")
    # Another one's staging folder, no metadata.json in it yet (as `fiberbench.outputs.atomic_folder` names it).
    (store.folder / "submissions" / "test" / ".next.tmp-1-x").mkdir()
    (store.folder / "submissions" / "test" / ".next.tmp-1-x" / "predictions.jsonl").write_text("{}\n")
    assert {entry.name for entry in store.read("test", "")[0]} == {"tied A", "tied B"} and store.head("test") == head


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
    assert name_key("ТОР") == name_key("top") == name_key("ＴＯＰ") == name_key("ΤΟΡ")  # Cyrillic, fullwidth, Greek


def test_a_submitter_may_send_a_few_a_day():
    limit = DailyLimit(2)
    limit.take("a"), limit.take("a"), limit.take("b")
    with pytest.raises(Refused, match=r"2 submissions a day \(UTC\) at most from each submitter"):
        limit.take("a")


def test_each_stored_file_is_scored_once_and_each_pair_compared_once(split, sample_splits, tmp_path, monkeypatch):
    """However many submissions came before, a new one costs its own scoring and its pairs with the others: the board
    scores only the files it has not scored, and compares only the pairs it has not compared (`python
    bench/leaderboard.py` times 100 submissions in a row against the first 10)."""
    scored, compared = [], []
    in_child, compare = populate.in_child, Board.compare
    monkeypatch.setattr(populate, "in_child", lambda function, split, settings, files: scored.append(len(files)) or
                        in_child(function, split, settings, files))
    monkeypatch.setattr(Board, "compare", lambda self, a, b: compared.append((a, b)) or compare(self, a, b))
    store, board = LocalStore(tmp_path / "store"), Board(split, SETTINGS)
    for number in range(5):
        path = tmp_path / f"system_{number}.jsonl"
        write_jsonl(path, prediction_rows(sample_splits["test"], lambda index, number=number: index % 5 <= number))
        submit(split, SETTINGS, store, path, fields(f"system {number}"), path.name)
        results = board.update(*store.read("test", ""))["results"]
        assert len(results["systems"]) == number + 1 and scored == [1] * (number + 1)
        assert len(compared) == len(set(compared)) == number * (number + 1) // 2
