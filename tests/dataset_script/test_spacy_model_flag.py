"""`--spacy_model` naming a pipeline that is not installed: one line naming it, never another pipeline in its place."""

import json

import pytest

RECORD = {
    "video_id": "vid_a",
    "video_start_time": 0,
    "video_end_time": 10,
    "caption": "A man is cutting a cake in the kitchen.",
    "masked_caption": "A man is cutting _____ in the kitchen.",
    "label": "a cake",
    "additional_answers": [["a cake"]],
}
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
