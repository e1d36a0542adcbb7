"""The README's `fiberbench predict` examples for causal LMs and `--reread`, run by bash as a reader would, on the tiny
model."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).parents[2] / "README.md"
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def readme_command(comment: str) -> str:
    """The command under the comment line starting with `comment` in the section "Run a Hub model on FIBER"."""
    section = README.read_text(encoding="utf-8").split("## Run a Hub model on FIBER", 1)[1].split("\n## ", 1)[0]
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
    command = readme_command("# The replies of qwen.jsonl read again")
    result = subprocess.run(
        ["bash", "-c", command], env=environment, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-4000:]
    settings = json.loads((tmp_path / "qwen_plain_reading.metadata.json").read_text())["settings"]
    assert "noun_phrase" not in settings["reader"]["readings"] and settings["prompt"]["template"] == template
