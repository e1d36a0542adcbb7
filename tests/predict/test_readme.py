"""The documentation's `fiberbench predict` examples (docs/video-llm.md) for causal LMs, `--reread` and video LLMs, run by
bash as a reader would, on tiny models."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).parents[2] / "docs" / "video-llm.md"
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def readme_command(comment: str) -> str:
    """The command under the comment line starting with `comment` in the section "Run a Hub model on FIBER"."""
    section = PAGE.read_text(encoding="utf-8").split("## Run a Hub model on FIBER", 1)[1].split("\n## ", 1)[0]
    lines = section.splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith(comment))
    command = next(index for index in range(start, len(lines)) if lines[index].startswith("fiberbench predict"))
    end = command
    while lines[end].endswith("\\"):
        end += 1
    return "\n".join(lines[command : end + 1])


@pytest.mark.slow
def test_the_causal_example_prompt_has_a_real_line_break_and_its_replies_read_again(tiny_models, tmp_path):
    command = readme_command("# A causal LM")
    output_file = tmp_path / "qwen.jsonl"
    command = re.sub(
        r"--model_name_or_path \S+", f"--model_name_or_path {shlex.quote(str(tiny_models['causal']))}", command
    )
    command = re.sub(r"--output_file \S+", f"--output_file {shlex.quote(str(output_file))}", command)
    # The bundled sample instead of the real FIBER folder, and two clips.
    command = command.replace("--dataset_name fiber", "--max_predict_samples 2")
    environment = {**os.environ, **OFFLINE, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(["bash", "-c", command], env=environment, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    template = json.loads(output_file.with_name("qwen.metadata.json").read_text())["settings"]["prompt"]["template"]
    assert template == "Fill in the blank: {masked_caption}\nAnswer with the missing noun phrase only."

    # The example of --reread, as it is, beside qwen.jsonl.
    command = readme_command("# The replies of qwen.jsonl")
    result = subprocess.run(
        ["bash", "-c", command], env=environment, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-4000:]
    settings = json.loads((tmp_path / "qwen_plain_reading.metadata.json").read_text())["settings"]
    assert "noun_phrase" not in settings["reader"]["readings"] and settings["prompt"]["template"] == template


def section_blocks(title: str) -> list[str]:
    """The bash blocks of a section of the page, in order."""
    section = PAGE.read_text(encoding="utf-8").split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)```", section, flags=re.DOTALL)


# The first line that marks the video section's blocks this environment runs (docs/index.md's "The examples"): the
# README test of the main environment leaves them to this one.
VIDEO_ENVIRONMENT = "# not run by the README test: needs the video environment"


@pytest.mark.video
@pytest.mark.slow
def test_the_video_llm_section_runs_as_written(tmp_path):
    """Every block of "Evaluate a video LLM" that needs the video environment, in order, by bash, offline, in a fresh
    folder holding the `fiber` dataset that "The dataset" builds (they write videos, models and outputs where they
    run); the install block and the block of real models (needs the Hub) are not run."""
    blocks = section_blocks("Evaluate a video LLM")
    runs = [block for block in blocks if block.startswith(VIDEO_ENVIRONMENT)]
    assert len(blocks) == 5 and len(runs) == 3, blocks  # and one install block, one of real models
    environment = {
        **os.environ,
        **OFFLINE,
        "HF_HOME": str(tmp_path / "hf"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    for block in ["fiberbench build-dataset --output_dir fiber", *runs]:
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block],
            cwd=tmp_path,
            env=environment,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert result.returncode == 0, (block, result.stderr[-3000:])
    [results] = (tmp_path / "outputs" / "lmms_eval").rglob("*_results.json")  # lmms-eval exits 0 when it fails
    comparison = json.loads((tmp_path / "outputs" / "video_llm_comparison" / "results.json").read_text())
    assert list(comparison["systems"]) == ["tiny Qwen2-VL (lmms-eval)", "tiny Qwen2.5-VL (predict)"]
    lmms_eval_f1 = json.loads(results.read_text())["results"]["fiber_test"]["f1,none"]
    assert comparison["systems"]["tiny Qwen2-VL (lmms-eval)"]["f1"] == pytest.approx(lmms_eval_f1, abs=1e-9)
