"""Flags, YAML configs and the checks that fail before any work."""

import argparse
import os

import pytest

from fiberbench.errors import DataError, UsageError
from fiberbench.training.arguments import FUSIONS as ARGUMENT_FUSIONS
from fiberbench.training.arguments import (
    CONFIGS_DIR,
    LR_SCHEDULER_TYPES,
    SAMPLE_DEMO_CONFIG,
    build_parser,
    HubCheckpoint,
    hub_checkpoint,
    parse_args,
    read_config,
)
from fiberbench.training.models import resolve_fusion

from ..processes import modules_loaded

# What a run loads and `--help` or a refusal must not.
HEAVY_LIBRARIES = ("spacy", "torch", "transformers", "datasets", "evaluate", "accelerate")

TABLE_3_CONFIGS = (
    "most_frequent_answer",
    "t5_zero_shot",
    "t5_fine_tuned",
    "t5_1f_i3d",
    "t5_i3d",
    "late_fusion_t5_1f_i3d",
    "late_fusion_t5_i3d",
)


def write_config(tmp_path, text: str):
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_are_the_paper_setup():
    args = parse_args(["--model_name_or_path", "t5-base", "--dataset_name", "fiber"])
    assert not args.sample_demo
    assert (args.per_device_train_batch_size, args.num_train_epochs, args.learning_rate) == (64, 10, 1e-4)
    assert args.lr_scheduler_type == "linear" and args.num_warmup_steps is None  # None: one epoch
    # No --spacy_model: $FIBERBENCH_SPACY_MODEL, else the paper's en_core_web_trf (`load_spacy_pipeline`).
    assert args.weight_decay == 0.0 and args.only_noun_phrases and args.spacy_model is None
    assert args.do_train and args.do_eval and args.do_predict


def test_no_model_and_no_dataset_layers_the_sample_demo_under_flags():
    demo = read_config(SAMPLE_DEMO_CONFIG)
    args = parse_args(["--fusion", "none"])
    assert args.sample_demo
    assert args.learning_rate == demo["learning_rate"] and args.output_dir == demo["output_dir"]
    assert args.fusion == "none"


def test_a_config_file_overrides_the_demo_and_flags_override_the_file(tmp_path):
    path = write_config(tmp_path, "learning_rate: 0.01\nnum_train_epochs: 2\ndo_eval: false\n")
    args = parse_args(["--config", str(path), "--num_train_epochs", "3"])
    assert args.sample_demo and args.learning_rate == 0.01 and not args.do_eval
    assert args.num_train_epochs == 3
    assert args.per_device_train_batch_size == read_config(SAMPLE_DEMO_CONFIG)["per_device_train_batch_size"]


@pytest.mark.parametrize("name", TABLE_3_CONFIGS)
def test_every_table_3_row_has_a_config_that_parses(name):
    args = parse_args(["--config", name])
    assert not args.sample_demo
    assert args.dataset_name == "fiber"
    assert args.output_dir == f"outputs/{name}"


def test_table_3_configs_are_all_shipped():
    assert {path.stem for path in CONFIGS_DIR.glob("*.yaml")} == {*TABLE_3_CONFIGS, "sample_demo"}


@pytest.mark.parametrize(
    "text, message",
    [
        ("learning_rat: 0.1\n", "unknown key(s) learning_rat"),
        ("fusion: middle\n", "invalid choice: 'middle'"),
        ("num_train_epochs: many\n", "must be an integer, got 'many'"),
        ("num_train_epochs: 0\n", "must be at least 1"),
        ("do_train: maybe\n", "ignored explicit argument 'maybe'"),
        ("with_tracking: 1\n", "ignored explicit argument '1'"),
        ("output_dir: [a, b]\n", "must be a single value"),
        ("- fusion\n", "expected a mapping"),
        ("learning_rate: .inf\n", "must be a finite number greater than 0"),
        ("learning_rate: -1.0e-5\n", "must be a finite number greater than 0"),
        ("fusion: [early\n", "not a readable YAML file"),
    ],
)
def test_bad_config_files_name_the_file_and_the_problem(tmp_path, text, message):
    path = write_config(tmp_path, text)
    with pytest.raises(UsageError, match="config.yaml") as error:
        parse_args(["--config", str(path)])
    assert message in str(error.value)


def laughs(depth: int) -> str:
    """A "billion laughs" YAML value: `depth` levels of nine aliases of the level below (9**depth "lol"s)."""
    levels = ["&l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    levels += [f"&l{level} [{', '.join([f'*l{level - 1}'] * 9)}]" for level in range(1, depth)]
    return f"learning_rate: [{', '.join(levels)}]\n"


@pytest.mark.parametrize("depth", [6, 9])
def test_a_billion_laughs_config_is_quoted_in_a_few_characters(tmp_path, depth):
    """A value's repr would grow to 9**depth "lol"s (3.5 GB at depth 9): the message quotes its beginning."""
    path = write_config(tmp_path, laughs(depth))
    with pytest.raises(UsageError, match=r"learning_rate must be a single value, got \[\['lol', 'lol', ") as error:
        parse_args(["--config", str(path)])
    assert len(str(error.value)) < 400


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--fusion", "middle"], "argument --fusion: invalid choice: 'middle' (choose from 'none', 'early', 'late')"),
        (["--lr_scheduler_type", "cosine_with_min_lr"], "argument --lr_scheduler_type: invalid choice"),
        (["--learning_rate", "inf"], "--learning_rate: must be a finite number greater than 0, got inf"),
        (["--learning_rate", "nan"], "--learning_rate: must be a finite number greater than 0, got nan"),
        (["--learning_rate=-1e-4"], "--learning_rate: must be a finite number greater than 0"),
        (["--learning_rate", "-0.0001"], "--learning_rate: must be a finite number greater than 0"),
        (["--learning_rate", "0"], "--learning_rate: must be a finite number greater than 0"),
        (["--weight_decay", "-0.1"], "--weight_decay: must be a finite number of 0 or more"),
        (["--num_warmup_steps", "-1"], "--num_warmup_steps: must be 0 or more, got -1"),
        (["--seed", "-1"], "--seed: must be 0 or more, got -1"),
        (["--seed", str(2**32)], "--seed: must be below 2**32, got 4294967296"),
        (["--trust_checkpoint"], "--trust_checkpoint applies to --resume_from_checkpoint"),
        (["--per_device_train_batch_size", "0"], "--per_device_train_batch_size: must be at least 1"),
        (["--per_device_eval_batch_size", "-2"], "--per_device_eval_batch_size: must be at least 1"),
        (["--dataloader_num_workers", "-1"], "--dataloader_num_workers: must be 0 or more"),
        (["--no_such_flag"], "unrecognized arguments: --no_such_flag"),
    ],
)
def test_bad_flags_are_usage_errors_before_any_work(argv, message):
    with pytest.raises(UsageError) as error:
        parse_args(argv)
    assert message in str(error.value)


def test_a_missing_checkpoint_folder_is_a_data_error():
    with pytest.raises(DataError, match=r"no/such/step_10: no such checkpoint folder \(and not a Hub repo"):
        parse_args(["--resume_from_checkpoint", "no/such/step_10"])


def test_a_name_that_is_no_folder_is_a_hub_checkpoint(tmp_path):
    args = argparse.Namespace(resume_from_checkpoint="org/run:step_30", hub_revision="v1")
    assert hub_checkpoint(args) == HubCheckpoint("org/run", "step_30", "v1")
    args = argparse.Namespace(resume_from_checkpoint="org/run", hub_revision=None)
    assert hub_checkpoint(args).folder == "last-checkpoint" and hub_checkpoint(args).given == "org/run"
    args = argparse.Namespace(resume_from_checkpoint=str(tmp_path), hub_revision=None)
    assert hub_checkpoint(args) is None  # a folder


def test_a_hub_checkpoint_that_cannot_be_reached_is_refused_while_the_arguments_are_checked(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(DataError, match="--resume_from_checkpoint org/run: no such checkpoint folder, and the Hub"):
        parse_args(["--resume_from_checkpoint", "org/run"])


def test_missing_config_file_lists_the_shipped_ones():
    with pytest.raises(UsageError, match="t5_i3d"):
        parse_args(["--config", "no_such_config"])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--no-do_train", "--no-do_eval", "--no-do_predict"], "Nothing to do"),
        (["--baseline", "most_frequent_answer", "--model_name_or_path", "t5-base"], "uses no model"),
        (["--model_name_or_path", "t5-base", "--config_overrides", "d_model=8"], "tiny model"),
        (["--push_to_hub", "--hub_model_id", "not a repo id"], "Invalid Hub repo id"),
        (["--push_to_hub", "--no-do_train"], "needs training"),
        (["--hub_strategy", "every_save"], "says when --push_to_hub pushes, which was not given"),
        (["--hub_revision", "v1"], "applies to a Hub repo given to --resume_from_checkpoint"),
        (
            ["--push_to_hub", "--hub_model_id", "org/fiber", "--hub_strategy", "checkpoint"],
            "--hub_strategy checkpoint pushes the checkpoints of --checkpointing_steps, which was not given",
        ),
        (["--tracker_project_name", ".hidden"], "must be a plain folder name"),
    ],
)
def test_impossible_combinations_fail_before_any_work(argv, message):
    with pytest.raises(UsageError, match=message):
        parse_args(argv)


def test_push_without_a_token_fails_before_training(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(UsageError, match="No Hugging Face token"):
        parse_args(["--push_to_hub", "--hub_model_id", "org/fiber"])


def test_fusion_comes_from_the_flag_else_the_paper_main_model():
    assert resolve_fusion(parse_args(["--fusion", "late"]), {}) == "late"
    assert resolve_fusion(parse_args(["--fusion", "late", "--baseline", "most_frequent_answer"]), {}) == "none"
    assert resolve_fusion(parse_args(["--config", str(SAMPLE_DEMO_CONFIG), "--fusion", "early"]), {}) == "early"
    with pytest.raises(UsageError, match="--single_feature"):
        resolve_fusion(parse_args(["--single_feature", "--fusion", "none"]), {})


def test_the_tracker_project_is_fiber_by_default():
    assert parse_args([]).tracker_project_name == "fiber"


def test_help_imports_no_heavy_library():
    """`train.py --help` answers at once: torch, transformers, datasets, accelerate and spaCy load only for a run."""
    code = (
        "import contextlib, io\n"
        "from fiberbench.training.train import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as help, contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "assert '--lr_scheduler_type' in help.getvalue()\n"
    )
    assert modules_loaded(code, HEAVY_LIBRARIES)[0] == []


@pytest.mark.parametrize(
    "environment, expected",
    [
        ({}, "is not empty and was not written by training/train.py"),
        # What `accelerate launch --num_processes 2` without --multi_gpu gives its one process.
        (
            {"MASTER_ADDR": "127.0.0.1", "ACCELERATE_MIXED_PRECISION": "no"},
            "was given several processes but started one",
        ),
    ],
    ids=["an output folder it may not write", "one process of several"],
)
def test_a_main_job_refused_for_its_output_folder_or_launch_loads_no_heavy_library(tmp_path, environment, expected):
    """The refusal comes before torch, transformers, datasets, accelerate and spaCy load: at once, on each process."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "thesis.tex").write_text("mine", encoding="utf-8")
    code = (
        "import sys\n"
        "from fiberbench.training.train import main\n"
        f"assert main(['--output_dir', {str(tmp_path / 'run')!r}]) == 2\n"
    )
    env = {name: value for name, value in os.environ.items() if name not in ("WORLD_SIZE", "MASTER_ADDR")}
    loaded, result = modules_loaded(code, HEAVY_LIBRARIES, env=env | environment)
    assert loaded == [] and expected in result.stderr


def test_the_flag_and_its_help_name_every_fusion_of_the_model():
    from fiberbench.modeling import FUSIONS

    help = build_parser().format_help()
    assert all(f'"{name}"' in help for name in FUSIONS)
    assert ARGUMENT_FUSIONS == FUSIONS  # written out so that parsing loads no torch


def test_every_lr_scheduler_type_is_one_transformers_builds_from_the_warm_up_and_the_length():
    """The schedulers --lr_scheduler_type offers, written out for --help, are transformers' and build as run.py builds
    them (those needing scheduler kwargs or a metric, like cosine_with_min_lr, are refused while parsing)."""
    import torch
    from transformers import SchedulerType, get_scheduler

    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
    for name in LR_SCHEDULER_TYPES:
        scheduler = get_scheduler(SchedulerType(name), optimizer=optimizer, num_warmup_steps=2, num_training_steps=10)
        optimizer.step()
        scheduler.step()
