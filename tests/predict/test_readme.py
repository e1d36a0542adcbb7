"""The examples of docs/video-llm.md that the README test cannot run: a causal LM's and `--reread`'s (on a tiny model
instead of the Hub's), and in the video environment every block of "Evaluate a video LLM", by bash as a reader would."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fiberbench.cli import main

REPO = Path(__file__).parents[2]
PAGE = REPO / "docs" / "video-llm.md"
ENVIRONMENT = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def section(title: str) -> str:
    return PAGE.read_text(encoding="utf-8").split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def command_under(comment: str) -> str:
    """The `fiberbench predict` command (with its continued lines) under the comment starting with `comment`."""
    lines = section("Run a Hub model on FIBER").splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith(comment))
    end = first = next(index for index in range(start, len(lines)) if lines[index].startswith("fiberbench predict"))
    while lines[end].endswith("\\"):
        end += 1
    return "\n".join(lines[first : end + 1])


def as_bash_reads_it(command: str, cwd: Path, monkeypatch) -> None:
    """A `fiberbench` command run by the CLI's `main` in this process (no process to start: about 4 CPU-s), on the
    words bash makes of it (its quoting, its continued lines), from `cwd`."""
    words = subprocess.run(["bash", "-euo", "pipefail", "-c", f"fiberbench() {{ printf '%s\\0' \"$@\"; }}\n{command}"],
                           capture_output=True, check=True).stdout.split(b"\0")[:-1]
    monkeypatch.chdir(cwd)
    assert main([word.decode() for word in words]) == 0


def bash(command: str, cwd, environment=ENVIRONMENT) -> None:
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=cwd, env=environment, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, (command, result.stderr[-3000:])


@pytest.mark.slow
def test_the_causal_example_has_a_real_line_break_in_its_prompt_and_its_replies_read_again(tiny_models, tmp_path,
                                                                                            monkeypatch):
    command = command_under("# A causal LM").replace("--dataset_name fiber", "--max_predict_samples 2")
    model = f"--model_name_or_path {tiny_models['causal']}"
    as_bash_reads_it(re.sub(r"--model_name_or_path \S+", model, command), tmp_path, monkeypatch)
    template = json.loads((tmp_path / "qwen.metadata.json").read_text())["settings"]["prompt"]["template"]
    assert template == "Fill in the blank: {masked_caption}\nAnswer with the missing noun phrase only."
    as_bash_reads_it(command_under("# The replies of qwen.jsonl"), tmp_path, monkeypatch)
    settings = json.loads((tmp_path / "qwen_plain_reading.metadata.json").read_text())["settings"]
    assert "noun_phrase" not in settings["reader"]["readings"] and settings["prompt"]["template"] == template


@pytest.mark.video
@pytest.mark.slow
def test_the_video_llm_section_runs_as_written(tmp_path):
    """Its blocks that need the video environment, in order, in a folder holding the `fiber` that "The dataset" builds
    and the repository's sample (they write videos, models and outputs there); not the install block, nor the Hub's."""
    blocks = re.findall(r"```bash\n(.*?)```", section("Evaluate a video LLM"), flags=re.DOTALL)
    runs = [block for block in blocks if block.startswith("# not run by the README test: needs the video environment")]
    assert len(blocks) == 5 and len(runs) == 3, blocks
    (tmp_path / "dataset_script").symlink_to(REPO / "dataset_script")
    for block in ["fiberbench build-dataset --output_dir fiber", *runs]:
        bash(block, tmp_path, ENVIRONMENT | {"HF_HOME": str(tmp_path / "hf")})
    [results] = (tmp_path / "outputs" / "lmms_eval").rglob("*_results.json")  # lmms-eval exits 0 when it fails
    comparison = json.loads((tmp_path / "outputs" / "video_llm_comparison" / "results.json").read_text())
    assert list(comparison["systems"]) == ["tiny Qwen2-VL (lmms-eval)", "tiny Qwen2.5-VL (predict)"]
    f1 = json.loads(results.read_text())["results"]["fiber_test"]["f1,none"]
    assert comparison["systems"]["tiny Qwen2-VL (lmms-eval)"]["f1"] == pytest.approx(f1, abs=1e-9)
