"""Long runs of `fiberbench extract-features`: killed and rerun (no clip encoded twice, none missing), and two processes
under `accelerate launch` (every clip once, the features of one process)."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from fiberbench.cli import main
from fiberbench.data import SAMPLE_DIR

pytestmark = pytest.mark.slow
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def command(encoder, videos, output_dir, *flags) -> list[str]:
    arguments = ["--model_name_or_path", encoder, "--video_dir", videos, "--data_dir", SAMPLE_DIR, "--output_dir"]
    return ["extract-features", *map(str, [*arguments, output_dir, *flags])]


def written(folder) -> dict[str, tuple[int, int]]:
    """Each features file there: its inode and modification time (a file written again gets new ones)."""
    return {path.name: (path.stat().st_ino, path.stat().st_mtime_ns) for path in folder.glob("[!.]*.npy")}


def test_a_killed_run_rerun_encodes_each_clip_once_and_none_is_missing(encoders, sample_videos, tmp_path, caplog):
    output_dir = tmp_path / "features"
    flags = ["--split", "test", "--per_device_batch_size", 1, "--dataloader_num_workers", 0]
    process = subprocess.Popen([sys.executable, "-m", "fiberbench.cli", *command(encoders["clip"], sample_videos, output_dir,
                                                                                 *flags)],
                               env={**os.environ, **OFFLINE}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while len(written(output_dir)) < 20 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    before = written(output_dir)
    assert 20 <= len(before) < 60, "the run was not killed in the middle"
    record = json.loads((output_dir / "fiberbench_output.json").read_text())
    assert record["state"] == "running" and len(record["files"]) == 61  # every file listed before it is written
    assert all(np.load(output_dir / name).shape[1:] == (10, 48) for name in before)  # whole files only
    caplog.set_level("INFO")
    assert main(command(encoders["clip"], sample_videos, output_dir, *flags)) == 0
    assert f"{len(before)} of 60 clips already done, {60 - len(before)} to encode" in caplog.text
    after = written(output_dir)
    assert len(after) == 60 and {name: after[name] for name in before} == before  # none written twice
    assert not [path for path in output_dir.iterdir() if path.name.startswith(".")]  # no temporary file left
    assert json.loads((output_dir / "fiberbench_output.json").read_text())["state"] == "complete"


def test_two_processes_encode_every_clip_once_as_one_does(encoders, sample_videos, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    flags = ["--split", "test", "--per_device_batch_size", 4]
    assert main(command(encoders["videomae"], sample_videos, one, *flags)) == 0
    launch = ["--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no"]
    result = subprocess.run([sys.executable, "-m", "accelerate.commands.launch", *launch, "--dynamo_backend", "no", "-m",
                             "fiberbench.cli", *command(encoders["videomae"], sample_videos, two, *flags)],
                            env={**os.environ, **OFFLINE, "ACCELERATE_USE_CPU": "1"}, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    counts = {int(rank): int(count) for rank, count in re.findall(r"Process (\d) of 2: encoded (\d+) clips", result.stderr)}
    # Each file is written by the one process that encodes it: 60 encodings in all, 60 files.
    assert sorted(counts) == [1, 2] and all(counts.values()) and sum(counts.values()) == 60, result.stderr[-4000:]
    assert (two / "features.json").read_bytes() == (one / "features.json").read_bytes()
    names = sorted(path.name for path in one.glob("*.npy"))
    assert len(names) == 60 and sorted(path.name for path in two.glob("*.npy")) == names
    for name in names:
        np.testing.assert_allclose(np.load(two / name), np.load(one / name), rtol=1e-5, atol=1e-6)
