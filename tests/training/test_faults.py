"""Faults during a run: a disk that fills up while a checkpoint is written."""

import json
import subprocess

import pytest
from safetensors.torch import load_file

pytestmark = pytest.mark.slow

# 4 steps, a checkpoint every 2: a checkpoint of the main job's tiny model takes about 6 MB
# (weights and Adam's two moments), so an 8 MB disk holds step_2 and runs out while writing step_4.
SETTINGS = ["--max_train_steps", 4, "--checkpointing_steps", 2, "--no-do_eval", "--no-do_predict"]
DISK_SIZE = "8m"


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of DISK_SIZE mounted for the test (root only); skipped where mounting is not permitted."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE}", "tmpfs", str(mount_point)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "--lazy", str(mount_point)], check=True)


def test_a_full_disk_during_a_checkpoint_is_one_line_and_keeps_the_previous_checkpoint(
    launch, failure_lines, small_disk
):
    output_dir = small_disk / "run"
    lines = failure_lines(launch([*SETTINGS, "--output_dir", output_dir], check=False))
    assert len(lines) == 1
    assert (
        f"Could not save the checkpoint {output_dir / 'step_4'} (" in lines[0] and "MiB free on that disk" in lines[0]
    )
    assert "the previous checkpoints are as they were" in lines[0]
    assert sorted(path.name for path in output_dir.iterdir()) == ["fiberbench_output.json", "step_2"]
    progress = json.loads((output_dir / "step_2" / "training_progress.json").read_text(encoding="utf-8"))
    assert progress["completed_steps"] == 2
    assert load_file(output_dir / "step_2" / "model.safetensors")
