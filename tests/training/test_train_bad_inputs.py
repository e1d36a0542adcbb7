"""Bad inputs to training/train.py: one line naming the problem, the exit status, and nothing written.

Every case fails before the run starts its processes, so they run in this process through
`main(argv)`, exactly as `python training/train.py ARGV` does (tests/training/test_train.py
launches the script for the failures that come later).
"""

import json

import pytest
from transformers import AutoTokenizer

from fiberbench.modeling import SAMPLE_TOKENIZER_PATH, FiberT5ForConditionalGeneration, build_tiny_config
from fiberbench.ownership import FOLDER_RECORD as RUN_MARKER
from fiberbench.training.train import main


@pytest.fixture
def train_error(user_error):
    """Run train.py's `main(argv)` and expect a user error: returns (exit status, its one line)."""
    return lambda *argv: user_error(main, argv, "train.py: error: ")


@pytest.fixture(scope="module")
def pickled_model(tmp_path_factory):
    """A model folder holding a config and only pickled weights (`pytorch_model.bin`)."""
    folder = tmp_path_factory.mktemp("pickled_model")
    model = FiberT5ForConditionalGeneration(build_tiny_config(AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH)))
    model.config.save_pretrained(folder)
    (folder / "pytorch_model.bin").write_bytes(b"a pickle train.py must never load")
    return folder


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# (case, argv builder from tmp_path, exit status, what the line says)
CASES = [
    (
        "YAML config that is a list",
        lambda tmp: ["--config", write(tmp / "c.yaml", "- fusion\n- early\n")],
        2,
        "expected a mapping of flag names to values, got a list",
    ),
    (
        "YAML config that does not parse",
        lambda tmp: ["--config", write(tmp / "c.yaml", "fusion: [early\n")],
        2,
        "not a readable YAML file",
    ),
    (
        "YAML config with a bad value",
        lambda tmp: ["--config", write(tmp / "c.yaml", "learning_rate: -1.0e-4\n")],
        2,
        "c.yaml: argument --learning_rate: must be a finite number greater than 0",
    ),
    ("missing config", lambda tmp: ["--config", tmp / "no_such.yaml"], 2, "no such file, and no config of that name"),
    (
        "batch size 0",
        lambda tmp: ["--per_device_train_batch_size", 0],
        2,
        "--per_device_train_batch_size: must be at least 1, got 0",
    ),
    (
        "negative learning rate",
        lambda tmp: ["--learning_rate=-0.001"],
        2,
        "--learning_rate: must be a finite number greater than 0, got -0.001",
    ),
    (
        "infinite learning rate",
        lambda tmp: ["--learning_rate", "inf"],
        2,
        "--learning_rate: must be a finite number greater than 0, got inf",
    ),
    ("negative warm-up", lambda tmp: ["--num_warmup_steps=-5"], 2, "--num_warmup_steps: must be 0 or more, got -5"),
    ("unknown flag", lambda tmp: ["--learning_rat", "0.1"], 2, "unrecognized arguments: --learning_rat 0.1"),
    (
        "missing dataset folder",
        lambda tmp: ["--dataset_name", tmp / "no" / "such" / "fiber"],
        1,
        "no such folder (and not a Hub dataset id)",
    ),
    (
        "missing model folder",
        lambda tmp: ["--model_name_or_path", tmp / "no" / "such" / "model"],
        1,
        "no such folder (and not a Hub model id)",
    ),
    (
        "missing checkpoint",
        lambda tmp: ["--resume_from_checkpoint", tmp / "no" / "step_3"],
        1,
        "no such checkpoint folder",
    ),
    (
        "output folder that is a file",
        lambda tmp: ["--output_dir", write(tmp / "out", "x")],
        2,
        "is a file, not a folder",
    ),
    (
        "output folder of someone else",
        lambda tmp: ["--output_dir", write(tmp / "out" / "thesis.tex", "x").parent],
        2,
        "is not empty and was not written by training/train.py",
    ),
    (
        "output folder inside the dataset",
        lambda tmp: ["--dataset_name", (tmp / "fiber").mkdir() or tmp / "fiber", "--output_dir", tmp / "fiber" / "out"],
        2,
        "lies inside the input folder",
    ),
]


@pytest.mark.parametrize("case, argv, status, message", CASES, ids=[case[0] for case in CASES])
def test_bad_input_is_one_line_and_nothing_is_written(train_error, tmp_path, case, argv, status, message):
    arguments = argv(tmp_path)
    if "--output_dir" not in arguments:
        arguments += ["--output_dir", tmp_path / "run"]
    before = sorted(path.relative_to(tmp_path) for path in tmp_path.rglob("*"))
    exit_status, line = train_error(*arguments)
    assert exit_status == status and message in line, line
    assert sorted(path.relative_to(tmp_path) for path in tmp_path.rglob("*")) == before


def test_a_model_folder_with_only_pickled_weights_is_refused(train_error, pickled_model, tmp_path):
    status, line = train_error("--model_name_or_path", pickled_model, "--output_dir", tmp_path / "run")
    assert status == 1 and "no model.safetensors in the folder (found: pytorch_model.bin)" in line
    assert not (tmp_path / "run").exists()


def test_an_unreachable_model_offline_fails_at_once_naming_the_ways_out(train_error, monkeypatch, tmp_path):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    status, line = train_error("--model_name_or_path", "fiber-org/no-such-model", "--output_dir", tmp_path / "run")
    assert status == 1
    assert "--model_name_or_path fiber-org/no-such-model: not a local folder, not in the Hugging Face cache" in line
    assert "HF_HUB_OFFLINE is set" in line and "hf download fiber-org/no-such-model" in line
    assert not (tmp_path / "run").exists()


def test_a_previous_run_is_not_clobbered(train_error, tmp_path):
    run = tmp_path / "run"
    write(
        run / RUN_MARKER, json.dumps({"written_by": "training/train.py", "entries": {"results.json": None}})
    )
    write(run / "results.json", "{}")
    status, line = train_error("--output_dir", run)
    assert status == 2 and "holds the output of an earlier run" in line and "--overwrite_output_dir" in line
    assert (run / "results.json").read_text(encoding="utf-8") == "{}"


@pytest.mark.parametrize("entry", ["step_2/thesis.tex", "model/credentials.txt"])
def test_a_users_folder_in_a_previous_run_is_refused_even_with_overwrite(train_error, tmp_path, entry):
    run = tmp_path / "run"
    write(run / RUN_MARKER, json.dumps({"written_by": "training/train.py", "entries": {"model": []}}))
    write(run / entry, "mine")
    status, line = train_error("--output_dir", run, "--overwrite_output_dir")
    assert status == 2 and "which training/train.py did not write" in line
    assert (run / entry).read_text(encoding="utf-8") == "mine"
