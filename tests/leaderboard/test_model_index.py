"""`fiberbench evaluate --model_index`: the Hub's model-index metadata, read back with huggingface_hub's model card."""

import json

import pytest
from huggingface_hub import ModelCard

from fiberbench.cli import main
from fiberbench.files import write_jsonl

from .conftest import FLAGS, prediction_rows, tied_a


@pytest.fixture
def ranked_file(tmp_path, sample_splits):
    """tied A's answers, with ranked candidates whose second is the label: Correct@1 and MAP too."""
    rows = prediction_rows(sample_splits["test"], tied_a)
    for row, blank in zip(rows, sample_splits["test"]):
        row["candidates"] = [row["prediction"], blank["label"]]
    write_jsonl(tmp_path / "ranked.jsonl", rows)
    return tmp_path / "ranked.jsonl"


def test_the_model_card_holds_the_scores_of_results_json(ranked_file, tmp_path):
    card_path = tmp_path / "README.md"
    output = tmp_path / "evaluation"
    args = ["evaluate", str(ranked_file), "--names", "FIBER T5 (tiny)", "--output_dir", str(output), *FLAGS]
    assert main([*args, "--model_index", str(card_path)]) == 0
    row = json.loads((output / "results.json").read_text())["systems"]["FIBER T5 (tiny)"]
    card = ModelCard.load(card_path)
    assert card.data.model_name == "FIBER T5 (tiny)"
    found = {(result.metric_type, result.metric_name): result.metric_value for result in card.data.eval_results}
    assert found == {
        ("exact_match", "EM"): round(row["exact_match"], 2),
        ("f1", "F1"): round(row["f1"], 2),
        ("exact_match", "EM, label only"): round(row["exact_match_label_only"], 2),
        ("f1", "F1, label only"): round(row["f1_label_only"], 2),
        ("correct_at_1", "Correct@1"): round(row["correct_at_k"]["1"], 2),
        ("map", "MAP"): round(row["map"], 2),
    }
    result = card.data.eval_results[0]
    assert (result.task_type, result.dataset_type, result.dataset_split, result.dataset_config) == (
        "video-text-to-text", "fiber", "test", "text"
    )
    assert result.dataset_name == "FIBER (SYNTHETIC sample)"
    assert oct(card_path.stat().st_mode & 0o777) == "0o644"


def test_an_existing_card_keeps_its_text_and_other_metadata(ranked_file, tmp_path):
    card_path = tmp_path / "README.md"
    card_path.write_text("---\nlicense: apache-2.0\ntags:\n- fiber\n---\n\n# My model\n\nTrained on FIBER.\n")
    assert main(["evaluate", str(ranked_file), "--names", "mine", "--model_index", str(card_path), *FLAGS]) == 0
    card = ModelCard.load(card_path)
    assert card.data.license == "apache-2.0" and card.data.tags == ["fiber"]
    assert card.text.strip() == "# My model\n\nTrained on FIBER."
    assert {result.metric_name for result in card.data.eval_results} >= {"EM", "F1"}


def test_several_systems_for_one_card_are_refused_in_one_line(predictions_files, tmp_path, capsys):
    files = [str(path) for path in predictions_files.values()]
    assert main(["evaluate", *files, "--model_index", str(tmp_path / "README.md")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "fiberbench evaluate: error: --model_index: a model card describes one model; give one predictions file, not 3"
    ]
    assert not (tmp_path / "README.md").exists()
