"""docs/make-your-own-fiber.md's commands, read from its block, one by one: blank, hit-inputs, answers, agreement,
stats, build-dataset. What lies between them is the user's: the crowd's results, in the layout that the annotation
page's submissions take on Mechanical Turk, and the clips' I3D features (random here)."""

import csv
import json
import re
import shlex
from pathlib import Path

import datasets
import numpy as np
import pytest

from fiberbench.cli import main
from fiberbench.modeling import noun_phrases
from fiberbench.records import clip_key, feature_file_name

from .conftest import PIPELINE, write_csv

VATEX_SAMPLE = Path(__file__).parent / "data" / "vatex_sample.json"
PAGE = Path(__file__).parents[2] / "docs" / "make-your-own-fiber.md"


def readme_commands() -> list[list[str]]:
    """The `fiberbench` commands of the page's "Make your own FIBER" block, as argument lists."""
    section = PAGE.read_text(encoding="utf-8").split("# Make your own FIBER", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)[1].replace("\\\n", " ")
    lines = [line.split("  #", 1)[0].strip() for line in block.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith("fiberbench ")]


def write_features(release: Path, features_dir: Path) -> None:
    """Random I3D features, in the release's file layout, for every clip of the release folder's splits."""
    features_dir.mkdir()
    for split_file in (release / "train.json", release / "val.json", release / "test.json"):
        for record in json.loads(split_file.read_text()):
            np.save(features_dir / feature_file_name(*clip_key(record)), np.random.default_rng(0).random((1, 4, 1024), "f4"))


def crowd_results(hits: Path, blanked: Path, results: Path) -> None:
    """Three workers per task; each answers every clip with its label and "someone else", one clip "unavailable"."""
    labels = {record["video_id"]: record["label"] for record in json.loads(blanked.read_text())}
    with hits.open(newline="") as file:
        tasks = list(csv.DictReader(file))
    rows = []
    for task_number, task in enumerate(tasks):
        for worker in ("W1", "W2", "W3"):
            clips = [(clip, labels[task[f"video{clip}_id"]]) for clip in range(1, 6) if task[f"video{clip}_id"]]
            answers = {f"answer-{clip}-1": label for clip, label in clips}
            answers |= {f"answer-{clip}-2": "someone else" for clip, _ in clips}
            if task_number == 0 and worker == "W3":
                answers = {key: value for key, value in answers.items() if not key.startswith("answer-2-")}
                answers["answer-2-1"] = "unavailable video"
            rows.append({"HITId": f"H{task_number}", "WorkerId": worker, **{f"Input.{c}": v for c, v in task.items()},
                         "Answer.taskAnswers": json.dumps([answers])})
    write_csv(results, rows)


@pytest.mark.slow
def test_make_your_own_fiber(tmp_path, monkeypatch, capsys):
    commands = readme_commands()
    names = ["blank", "blank", "blank", "hit-inputs", "hit-inputs", "answers", "agreement", "stats", "build-dataset"]
    assert [command[0] for command in commands] == names
    # The page names no pipeline: its default, en_core_web_trf, is the tests' small one here.
    monkeypatch.setattr(noun_phrases, "DEFAULT_PIPELINE", PIPELINE)
    monkeypatch.chdir(tmp_path)
    clips = json.loads(VATEX_SAMPLE.read_text())
    for split, part in (("train", clips[:12]), ("val", clips[12:23]), ("test", clips[23:])):
        Path(f"vatex_{split}.json").write_text(json.dumps(part))

    # 1. Blank (in two worker processes each), 2. the crowd tasks.
    for command in commands[:5]:
        assert main(command) == 0, command
    # 3. The crowd answers every task: what Mechanical Turk exports, then the merge.
    for split in ("val", "test"):
        crowd_results(Path(f"hits_{split}.csv"), Path(f"{split}.json"), Path(f"Batch_{split}_results.csv"))
    assert main(commands[5]) == 0
    val = json.loads(Path("release/val.json").read_text())
    blanked_val = json.loads(Path("val.json").read_text())
    assert [record["video_id"] for record in val] == [record["video_id"] for record in blanked_val[:1] + blanked_val[2:]]
    assert all(record["additional_answers"] == [[record["label"], "someone else"]] * 3 for record in val)

    # 4. Agreement and statistics.
    capsys.readouterr()
    assert main(commands[6]) == 0
    assert "| first answers, per caption | 100.0 (± 0.0) | 100.0 (± 0.0) |" in capsys.readouterr().out
    assert main(commands[7]) == 0
    stats = json.loads(Path("release/stats_val/stats.json").read_text())
    assert stats["num_captions"] == len(val) and stats["annotations"]["num_answers"] == 6 * len(val)

    # 5. The dataset folder, with the clips' features.
    write_features(Path("release"), Path("features"))
    assert main(commands[8]) == 0
    built = datasets.load_dataset(str(tmp_path / "my_fiber"), "i3d")
    assert built["validation"]["additional_answers"] == [record["additional_answers"] for record in val]
    test = json.loads(Path("release/test.json").read_text())
    assert built.num_rows == {"train": 9, "validation": len(val), "test": len(test)}
    assert np.asarray(built["test"][0]["video_features"]).shape == (4, 1024)
