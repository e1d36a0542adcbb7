"""Fixtures of the dataset tool tests: a small copy of the sample in the release layout, to break, and a killer."""

import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from fiberbench.data import SAMPLE_DIR
from fiberbench.records import feature_file_name

SPLIT_FILES = {"train": "train.json", "validation": "val.json", "test": "test.json"}
CLIPS = {"train": 20, "validation": 10, "test": 10}


@pytest.fixture
def release_dir(tmp_path):
    """The first clips of each split of the sample, their I3D files and the validation categories."""
    folder = tmp_path / "release"
    (folder / "i3d").mkdir(parents=True)
    for split, name in SPLIT_FILES.items():
        records = json.loads((SAMPLE_DIR / name).read_text())[: CLIPS[split]]
        (folder / name).write_text(json.dumps(records))
        for record in records:
            file_name = feature_file_name(record["video_id"], record["video_start_time"], record["video_end_time"])
            shutil.copyfile(SAMPLE_DIR / "i3d" / file_name, folder / "i3d" / file_name)
    shutil.copyfile(SAMPLE_DIR / "categories_val.tsv", folder / "categories_val.tsv")
    return folder


@pytest.fixture
def kill_when():
    """`kill_when(command, ready)`: run `command` in a new process and SIGKILL it once `ready()` holds.

    Fails the test if the process ends first; returns the process's exit status (-SIGKILL).
    """

    def run(command: list[str], ready, timeout: float = 120) -> int:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + timeout
            while not ready():
                assert process.poll() is None and time.monotonic() < deadline, f"{command} ended before it was killed"
                time.sleep(0.02)
            os.kill(process.pid, signal.SIGKILL)
        finally:
            process.kill()
            process.wait()
        return process.returncode

    return run


def blanked_record(video_id: str, caption: str, label: str, start: int = 10, end: int = 20) -> dict:
    """A record of a blanked file (as `fiberbench blank` writes) of the clip from `start` to `end` seconds, its
    `label` blanked in `caption`."""
    return {
        "video_id": video_id,
        "video_start_time": start,
        "video_end_time": end,
        "caption": caption,
        "masked_caption": caption.replace(label, "_____", 1),
        "label": label,
    }
