"""`fiberbench stats` (Table 1, gender words, top answers, POS sequences, charts) of a hand-counted file; bad inputs."""

import json
import logging
import shutil

import pytest

from fiberbench.cli import main
from fiberbench.data import SAMPLE_DIR
from fiberbench.data.stats import chart_figure

from .conftest import PIPELINE, blanked_record, cases

RECORDS = [
    blanked_record("v1", "A man is cutting a cake in the kitchen.", "A man", 0, 10)
    | {"additional_answers": [["a man", "the chef", "He"], ["A woman", "is cutting"]]},
    blanked_record("v2", "Two boys are kicking a ball in the park.", "a ball", 0, 10)
    | {"additional_answers": [["a soccer ball", "ball"], ["a big ball"], ["two balls"]]},
    blanked_record("v3", "Two boys are kicking a ball in the park.", "the park", 0, 10),  # a training-style record
]
# Counted by hand. Normalized labels: man, ball, park. Normalized annotations (9): man, chef, he,
# woman, "is cutting", "soccer ball", ball, "big ball", "two balls": 13 tokens of 52 characters.
EXPECTED_LABELS = {
    "num_answers": 3, "noun_phrases_percent": 100.0, "tokens": {"mean": 1.0, "std": 0.0}, "visual_words_percent": 0.0,
    "characters_per_token": {"mean": 11 / 3, "std": (41 / 3 - (11 / 3) ** 2) ** 0.5},
    "gender_words_percent": {"male": 100 / 3, "female": 0.0, "neutral": 0.0},
}
EXPECTED_ANNOTATIONS = {
    "num_answers": 9,
    "noun_phrases_percent": 100 * 8 / 9,  # all but "is cutting"
    "characters_per_token": {"mean": 52 / 13, "std": (234 / 13 - 16) ** 0.5},  # squares sum to 234
    "tokens": {"mean": 13 / 9, "std": (21 / 9 - (13 / 9) ** 2) ** 0.5},  # 1,1,1,1,2,2,1,2,2
    "visual_words_percent": 100 * 2 / 9,  # big (size), two (number)
    "gender_words_percent": {"male": 100 * 2 / 9, "female": 100 / 9, "neutral": 0.0},  # man, he; woman
    "unique_answers_per_caption": {"mean": 4.5, "std": 0.5},  # 5 and 4
    "unique_answers_per_caption_per_annotator": {"mean": (2.5 + 4 / 3) / 2, "std": (2.5 - 4 / 3) / 2},
}


def flatten(mapping: dict, prefix: str = "") -> dict:
    """{"a": {"b": 1}} -> {"a.b": 1}, for pytest.approx (which takes no nested dicts)."""
    flat = {}
    for key, value in mapping.items():
        flat.update(flatten(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value})
    return flat


@pytest.fixture(scope="module")
def stats_dir(tmp_path_factory):
    source = tmp_path_factory.mktemp("release") / "val.json"
    source.write_text(json.dumps(RECORDS))
    folder = source.parent / "stats_val"
    assert main(["stats", str(source), "--output_dir", str(folder), "--spacy_model", PIPELINE]) == 0
    return folder


def test_table_1_top_answers_pos_sequences_and_the_report(stats_dir):
    stats = json.loads((stats_dir / "stats.json").read_text())
    assert stats["num_captions"] == 3 and stats["synthetic"] is False
    for group, expected in (("labels", EXPECTED_LABELS), ("annotations", EXPECTED_ANNOTATIONS)):
        assert flatten({key: stats[group][key] for key in expected}) == pytest.approx(flatten(expected))
    assert stats["word_lists"]["gender (paper §A.5)"]["female"][0] == "daughter"
    assert [(entry["value"], entry["count"]) for entry in stats["labels"]["top_answers"]] == [("man", 1), ("ball", 1),
                                                                                               ("park", 1)]
    answers = stats["annotations"]["top_answers"]
    assert [entry["value"] for entry in answers][:5] == ["man", "chef", "he", "woman", "is cutting"] and len(answers) == 9
    assert [(entry["value"], entry["count"]) for entry in stats["labels"]["pos_sequences"]] == [("DET NOUN", 3)]
    sequences = {"DET NOUN": 3, "PRON": 1, "AUX VERB": 1, "DET NOUN NOUN": 1, "NOUN": 1, "DET ADJ NOUN": 1, "NUM NOUN": 1}
    assert {entry["value"]: entry["count"] for entry in stats["annotations"]["pos_sequences"]} == sequences
    report = (stats_dir / "stats.md").read_text()
    for row in ("| Noun phrases | 100.00% | 88.89% |", "| Unique answers per caption | – | 4.50 ± 0.50 |",
                "| Male words | 33.33% | 22.22% |", "| 1 | DET NOUN | 100.00 | DET NOUN | 33.33 |"):
        assert row in report
    assert "SYNTHETIC" not in report


@pytest.mark.parametrize("key", ["top_answers", "pos_sequences"])
def test_the_charts_are_pngs_on_one_scale_naming_their_source_and_labelling_every_bar(stats_dir, key):
    data = (stats_dir / f"{key}.png").read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 5000
    stats = json.loads((stats_dir / "stats.json").read_text())
    figure = chart_figure(stats, key, "val.json")
    labels, answers = figure.axes
    assert labels.get_xlim() == answers.get_xlim() and "val.json" in figure.get_suptitle()
    for ax, group in zip(figure.axes, ("labels", "annotations")):
        assert [text.get_text() for text in ax.texts] == [f"{entry['percent']:.1f}%" for entry in stats[group][key][::-1]]


def test_the_bundled_samples_file_is_said_to_be_synthetic(tmp_path, caplog):
    source = shutil.copyfile(SAMPLE_DIR / "val.json", tmp_path / "val.json")
    with caplog.at_level(logging.WARNING):
        assert main(["stats", str(source), "--output_dir", str(tmp_path / "stats"), "--spacy_model", PIPELINE]) == 0
    report = (tmp_path / "stats" / "stats.md").read_text()
    assert "**SYNTHETIC data** (the bundled sample's val.json, or a copy): the numbers say nothing" in report
    assert "Statistics of SYNTHETIC data" in caplog.text
    assert json.loads((tmp_path / "stats" / "stats.json").read_text())["synthetic"] is True


BAD_RECORD = json.dumps({**RECORDS[0], "label": "A " + "very " * 200_000 + "big man",
                         "caption": "A " + "very " * 200_000 + "big man is cutting a cake in the kitchen."})


@pytest.mark.parametrize(("content", "arguments", "status", "message"), cases([
    ("empty", "", [], 1, r"val.json: holds no records"),
    ("not an object", "[[1, 2]]", [], 1, r"val.json: record 0: expected a JSON object, got list"),
    ("bad answers", json.dumps([{**RECORDS[0], "additional_answers": "dog"}]), [], 1,
     r"val.json: record 0: field 'additional_answers'"),
    ("a caption of 1 MB", f"[{BAD_RECORD}]", [], 1, r"val.json: record 0: field 'masked_caption': 1,000,048 characters "
     r"with its longest answer, more than the spaCy pipeline takes \(1,000,000\)"),
    ("the input's folder", json.dumps(RECORDS), ["--output_dir", "{d}"], 2, r"--output_dir .* holds the input .*val.json"),
]))
def test_a_bad_input_is_one_line_and_writes_nothing(tmp_path, refused, content, arguments, status, message):
    (tmp_path / "val.json").write_text(content)
    # The row's --output_dir comes last: argparse keeps the last value of a flag given twice.
    arguments = ["--output_dir", tmp_path / "stats", *(argument.format(d=tmp_path) for argument in arguments)]
    refused(tmp_path, status, message, "stats", tmp_path / "val.json", *arguments, "--spacy_model", PIPELINE)
