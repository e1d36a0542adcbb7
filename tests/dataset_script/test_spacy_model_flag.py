"""`--spacy_model` naming a pipeline that is not installed: one line naming it, never another pipeline in its place."""

import json

import pytest

from .conftest import blanked_record

RECORD = blanked_record("vid_a", "A man is cutting a cake in the kitchen.", "a cake", start=0, end=10)
RECORD["additional_answers"] = [["a cake"]]
# Each data command that parses with spaCy, on good inputs written into the folder "{d}".
COMMANDS = {
    "blank": ["{d}/vatex.json", "--output_file", "{d}/out/blanked.json"],
    "stats": ["{d}/val.json", "--output_dir", "{d}/out"],
    "answers": ["--blanked_files", "{d}/val.json", "--answers_files", "{d}/answers.csv", "--output_dir", "{d}/out"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_mistyped_spacy_model_is_one_line_naming_it_and_writes_nothing(tmp_path, cli_error, caplog, command):
    (tmp_path / "vatex.json").write_text(json.dumps([{"videoID": "vid_a_000000_000010", "enCap": ["A dog runs."]}]))
    (tmp_path / "val.json").write_text(json.dumps([RECORD]))
    (tmp_path / "answers.csv").write_text(
        "video_id,video_start_time,video_end_time,annotator_id,answer_1\nvid_a,0,10,w1,a cake\n"
    )
    arguments = [argument.format(d=tmp_path) for argument in COMMANDS[command]]
    status, line = cli_error(command, *arguments, "--spacy_model", "nonexistent_model")
    assert status == 1
    assert f"fiberbench {command}: error: spaCy pipeline 'nonexistent_model' cannot be loaded" in line
    assert "python -m spacy download nonexistent_model" in line
    assert "instead" not in caplog.text  # no fallback pipeline was tried
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(
    __import__("spacy").util.is_package("en_core_web_trf"), reason="the paper's pipeline is installed: no fallback"
)
def test_a_command_says_it_uses_a_smaller_pipeline_in_one_short_line(tmp_path):
    """Without en_core_web_trf every command that parses falls back, and says so once, briefly."""
    import os
    import subprocess
    import sys

    from fiberbench.data import SAMPLE_DIR

    environment = {key: value for key, value in os.environ.items() if key != "FIBERBENCH_SPACY_MODEL"}
    result = subprocess.run(
        [sys.executable, "-m", "fiberbench.cli", "stats", str(SAMPLE_DIR / "val.json"), "--output_dir",
         str(tmp_path / "stats")],
        capture_output=True, text=True, env=environment, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if "en_core_web_trf" in line]
    assert len(said) == 1 and len(said[0].split(": ", 1)[1]) <= 150, said
    assert "FIBERBENCH_SPACY_MODEL" in said[0]
