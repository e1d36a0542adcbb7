"""Long runs of `fiberbench extract-features`: killed and rerun (no clip encoded twice, none missing), two processes
(every clip once, the features of one process)."""

import json
import logging
import os
import re
import signal
import subprocess
import time

import numpy as np
import pytest
from fiberbench.data import SAMPLE_DIR

from fiberbench.cli import main

from ..predict.test_long_runs import run_in_a_process, run_in_two_cpu_processes

pytestmark = pytest.mark.slow


def command(encoder, videos, output_dir, *flags) -> list[str]:
    arguments = ["--model_name_or_path", encoder, "--video_dir", videos, "--data_dir", SAMPLE_DIR]
    return ["extract-features", *map(str, arguments), "--output_dir", str(output_dir), *map(str, flags)]


def written(folder) -> dict[str, tuple[int, int]]:
    """Each features file there (not a hidden temporary one): its inode and modification time (a file written again
    gets new ones)."""
    files = [path for path in folder.glob("*.npy") if not path.name.startswith(".")]
    return {path.name: (path.stat().st_ino, path.stat().st_mtime_ns) for path in files}


def test_a_killed_run_rerun_encodes_each_clip_once_and_none_is_missing(encoders, sample_videos, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    output_dir = tmp_path / "features"
    flags = ["--split", "train", "--per_device_batch_size", 1, "--dataloader_num_workers", 0]
    process = run_in_a_process(
        command(encoders["clip"], sample_videos, output_dir, *flags),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while len(written(output_dir)) < 20 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    before = written(output_dir)
    assert 20 <= len(before) < 400, "the run was not killed in the middle"
    record = json.loads((output_dir / "fiberbench_output.json").read_text())
    assert record["state"] == "running" and len(record["entries"]) == 401  # every file listed before it is written
    assert all(np.load(output_dir / name).shape[1:] == (10, 48) for name in before)  # whole files only

    caplog.clear()
    assert main(command(encoders["clip"], sample_videos, output_dir, *flags)) == 0
    assert f"{len(before)} of 400 clips already done, {400 - len(before)} to encode" in caplog.text
    assert f"Process 1 of 1: encoded {400 - len(before)} clips" in caplog.text
    after = written(output_dir)
    assert len(after) == 400 and {name: after[name] for name in before} == before  # none written twice
    assert [path.name for path in output_dir.iterdir() if path.name.startswith(".")] == []  # no temporary file left
    record = json.loads((output_dir / "fiberbench_output.json").read_text())
    assert record["state"] == "complete" and record["output"]["encoded"] == 400 - len(before)


def test_two_processes_encode_every_clip_once_as_one_does(encoders, sample_videos, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    flags = ["--split", "test", "--per_device_batch_size", 4]
    assert main(command(encoders["videomae"], sample_videos, one, *flags)) == 0
    status, stderr = run_in_two_cpu_processes(command(encoders["videomae"], sample_videos, two, *flags), timeout=600)
    assert status == 0, stderr[-4000:]
    counts = {int(rank): int(count) for rank, count in re.findall(r"Process (\d) of 2: encoded (\d+) clips", stderr)}
    # Each file is written by the one process that encodes it: 60 encodings in all, 60 files.
    assert sorted(counts) == [1, 2] and all(counts.values()) and sum(counts.values()) == 60, stderr[-4000:]
    assert json.loads((two / "fiberbench_output.json").read_text())["output"]["encoded"] == 60
    assert (two / "features.json").read_bytes() == (one / "features.json").read_bytes()
    names = sorted(path.name for path in one.glob("*.npy"))
    assert len(names) == 60 and sorted(path.name for path in two.glob("*.npy")) == names
    for name in names:
        np.testing.assert_allclose(np.load(two / name), np.load(one / name), rtol=1e-5, atol=1e-6)
