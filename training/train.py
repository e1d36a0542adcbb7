"""Train and evaluate a FIBER model, or run a baseline, with Accelerate (paper §4-5, App. B).

    accelerate launch --config_file training/accelerate.yaml training/train.py       # main job: tiny model, sample
    accelerate launch --config_file training/accelerate.yaml training/train.py --fusion none   # text only
    accelerate launch --config_file training/accelerate.yaml training/train.py --config t5_i3d   # a row of Table 3

`training/accelerate.yaml` gives the launcher one process on this machine (its GPU if it has one),
so that it guesses nothing and warns of nothing; `--multi_gpu --num_processes N` beside it starts N.

The same script runs on a CPU, one GPU, several GPUs or nodes, with FSDP too (whatever `accelerate
config` or `accelerate launch` sets up). It evaluates on validation after each epoch, keeps the
model with the best validation F1, evaluates it at the end (validation and test), and writes into
--output_dir: `results.json`, `predictions.jsonl`, the model folder `model/` (save_pretrained,
processor, generation config, model card) and the checkpoints asked for by --checkpointing_steps,
listed in its record `fiberbench_output.json`, which says `running` until the run is done (see
`RunFolder`); the main process holds the folder's lock for the whole run. --push_to_hub pushes the
model at the end, and with --hub_strategy at each save too, with its checkpoints, in the background;
--resume_from_checkpoint REPO_ID resumes from a checkpoint on the Hub. A user error (a flag, a
config file, the data, a model that cannot be loaded, an output folder that is not this script's)
is one line on stderr.

The flags, the config file and the paths they name, the launch and the output folder are checked before torch,
transformers and datasets load (seconds per process): the run itself is `fiberbench.training.run`.
"""

import sys

from fiberbench.collector import collector_held_off
from fiberbench.errors import alike_on_every_process, run_reporting_errors
from fiberbench.training.arguments import PROG, parse_args
from fiberbench.training.launch import check_launch, loader_worker_context
from fiberbench.training.outputs import check_output_dir


def main(argv: list[str] | None = None) -> int:
    """Run the script; returns its exit status (1 for a data error, 2 for a usage error, each one line)."""

    def checked_then_run() -> None:
        with alike_on_every_process():
            args = parse_args(argv)
            check_launch()
            output = check_output_dir(args)
        loader_worker_context(args)  # starts the forkserver of a pushing run's workers now, before torch loads
        with collector_held_off():
            from fiberbench.training.run import train_and_evaluate

        train_and_evaluate(args, output)

    return run_reporting_errors(checked_then_run, prog=PROG)


if __name__ == "__main__":
    sys.exit(main())
