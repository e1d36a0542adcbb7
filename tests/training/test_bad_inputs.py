"""Bad inputs to training/train.py: one line naming the problem, the exit status, and nothing written; earlier runs'
folders replaced only with --overwrite_output_dir and only when train.py wrote them.

The cases fail before the run starts training, so they run in this process through `main(argv)`, as
`python training/train.py ARGV` does."""

import json
import shutil

import pytest
from transformers import AutoTokenizer

from fiberbench.modeling import SAMPLE_TOKENIZER_PATH, FiberT5ForConditionalGeneration, build_tiny_config
from fiberbench.outputs import FOLDER_RECORD, output_lock
from fiberbench.training.train import main


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def pickled_model(folder):
    """A model folder holding a config and only pickled weights (`pytorch_model.bin`)."""
    FiberT5ForConditionalGeneration(build_tiny_config(AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH))).config \
        .save_pretrained(folder)
    (folder / "pytorch_model.bin").write_bytes(b"a pickle train.py must never load")
    return folder


def earlier_run(folder, files=("results.json",), written_by="training/train.py", extra=()):
    """A folder as an earlier run left it: its files and its record, and files it does not list (`extra`)."""
    for name in (*files, *extra):
        write(folder / name, "{}")
    write(folder / FOLDER_RECORD, json.dumps({"written_by": written_by, "state": "complete", "files": list(files)}))
    return folder


# (case, argv from tmp_path, exit status, what the line says); --output_dir is tmp_path/run unless given.
CASES = [
    ("config that is a list", lambda t: ["--config", write(t / "c.yaml", "- fusion\n")], 2, "c.yaml: expected a mapping"),
    ("config that does not parse", lambda t: ["--config", write(t / "c.yaml", "fusion: [early\n")], 2,
     "c.yaml: not a readable YAML file"),
    ("config with a bad value", lambda t: ["--config", write(t / "c.yaml", "num_train_epochs: many\n")], 2,
     "c.yaml: argument --num_train_epochs/--num-train-epochs: invalid float value: 'many'"),
    ("config with an unknown key", lambda t: ["--config", write(t / "c.yaml", "learning_rat: 0.1\n")], 2,
     "c.yaml: unknown key(s) learning_rat"),
    ("config with a list", lambda t: ["--config", write(t / "c.yaml", "output_dir: [a, b]\n")], 2,
     "output_dir must be a single value"),
    ("missing config", lambda t: ["--config", "no_such"], 2, "no such file, and no config of that name"),
    ("unknown flag", lambda t: ["--learning_rat", "0.1"], 2, "not used by the HfArgumentParser: ['--learning_rat', '0.1']"),
    ("unknown fusion", lambda t: ["--fusion", "middle"], 2, "argument --fusion: invalid choice: 'middle'"),
    ("batch size 0", lambda t: ["--per_device_train_batch_size", 0], 2,
     "--per_device_train_batch_size: must be a finite number greater than 0, got 0"),
    ("negative learning rate", lambda t: ["--learning_rate=-0.001"], 2,
     "--learning_rate: must be a finite number greater than 0, got -0.001"),
    ("infinite learning rate", lambda t: ["--learning_rate", "inf"], 2, "must be a finite number greater than 0, got inf"),
    ("nothing to do", lambda t: ["--do_train", "false", "--do_eval", "false", "--do_predict", "false"], 2,
     "Nothing to do"),
    ("a baseline and a model", lambda t: ["--baseline", "most_frequent_answer", "--model_name_or_path", "t5-base"], 2,
     "build no model from --model_name_or_path"),
    ("a push without training", lambda t: ["--push_to_hub", "--hub_model_id", "org/x", "--do_train", "false"], 2,
     "--push_to_hub pushes the model this run trains"),
    ("a push to a bad repo id", lambda t: ["--push_to_hub", "--hub_model_id", "not a repo id"], 2,
     "Invalid Hub repo id"),
    ("missing dataset folder", lambda t: ["--dataset_name", t / "no" / "fiber"], 1,
     "no such folder (and not a Hub dataset id)"),
    ("missing model folder", lambda t: ["--model_name_or_path", t / "no" / "model"], 1,
     "no such folder (and not a Hub model id)"),
    ("model of pickled weights only", lambda t: ["--model_name_or_path", pickled_model(t / "pickled")], 1,
     "model.safetensors"),
    ("missing checkpoint", lambda t: ["--resume_from_checkpoint", t / "no" / "checkpoint-3"], 1,
     "no such checkpoint folder"),
    ("fusion without video", lambda t: ["--fusion", "early", "--dataset_config_name", "text"], 1,
     "--fusion early needs video features"),
    ("output folder that is a file", lambda t: ["--output_dir", write(t / "out", "x")], 2, "is a file, not a folder"),
    ("output folder of someone else", lambda t: ["--output_dir", write(t / "out" / "thesis.tex", "x").parent], 2,
     "has no record fiberbench_output.json, not training/train.py's"),
    ("output folder inside the dataset", lambda t: ["--dataset_name", (t / "fiber").mkdir() or t / "fiber",
                                                    "--output_dir", t / "fiber" / "out"], 2, "lies inside the input"),
    ("earlier run, no overwrite", lambda t: ["--output_dir", earlier_run(t / "out")], 2,
     "holds the output of an earlier run of training/train.py (complete); pass --overwrite_output_dir"),
    ("a user's file in an earlier run", lambda t: ["--output_dir", earlier_run(t / "out", extra=["model/mine.txt"]),
                                                   "--overwrite_output_dir"], 2, "model/mine.txt, which training/train.py did not write"),
    ("another command's output", lambda t: ["--output_dir", earlier_run(t / "out", written_by="fiberbench evaluate"),
                                            "--overwrite_output_dir"], 2, "was written by fiberbench evaluate"),
]


@pytest.mark.parametrize("case, argv, status, message", CASES, ids=[case[0] for case in CASES])
def test_bad_input_is_one_line_and_nothing_is_written(user_error, tmp_path, case, argv, status, message):
    arguments = argv(tmp_path)
    arguments += [] if "--output_dir" in arguments else ["--output_dir", tmp_path / "run"]
    before = {path: path.stat().st_mtime_ns for path in tmp_path.rglob("*")}
    exit_status, line = user_error(main, arguments, "train.py: error: ")
    assert exit_status == status and message in line, line
    assert {path: path.stat().st_mtime_ns for path in tmp_path.rglob("*")} == before


@pytest.mark.slow
def test_overwrite_replaces_only_what_the_earlier_run_wrote(train_here, main_job, tmp_path):
    output_dir = tmp_path / "run"
    shutil.copytree(main_job[0], output_dir)
    train_here(["--baseline", "most_frequent_answer", "--output_dir", output_dir, "--overwrite_output_dir"])
    assert sorted(path.name for path in output_dir.iterdir()) == [FOLDER_RECORD, "predictions.jsonl", "results.json"]
    assert json.loads((output_dir / "results.json").read_text())["arguments"]["baseline"] == "most_frequent_answer"


@pytest.mark.slow
def test_a_second_run_into_a_folder_being_written_is_refused(user_error, tmp_path):
    with output_lock(tmp_path / "run", "--output_dir"):
        status, line = user_error(main, ["--output_dir", tmp_path / "run"], "train.py: error: ")
    assert status == 2 and f"--output_dir {tmp_path / 'run'} is being written by another run" in line
    assert not (tmp_path / "run").exists()
