"""The processes of a `train.py` run: one `Accelerator` over the launched processes, their logging, and how their
data loader workers start.

`accelerate launch` may start processes that do not form one group (several independent runs all
writing the same folder); `check_launch` refuses a launch that started one process of several, and
`make_accelerator` processes that do not form one group, in one line saying how to launch.
`check_launch` reads the environment alone: `train.py` calls it before torch, accelerate, datasets
and transformers load (seconds per process), which this module imports only where it uses them.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import multiprocessing.forkserver
import os
from pathlib import Path
from typing import TYPE_CHECKING

from fiberbench.errors import UsageError
from fiberbench.training.outputs import LOGS_FOLDER

if TYPE_CHECKING:
    from accelerate import Accelerator

# The launcher's settings for one process on this machine, which the README's and the docs' `accelerate launch`
# lines name with --config_file: without them, and with no `accelerate config` of the user's, the launcher guesses
# each setting and warns about it ("`--num_processes` was set to a value of `0`" on a machine without GPUs).
ACCELERATE_CONFIG = Path(__file__).resolve().parent / "accelerate.yaml"
HOW_TO_LAUNCH = (
    "start several processes with `accelerate launch --config_file training/accelerate.yaml --multi_gpu "
    "--num_processes N training/train.py ...` "
    "(on a machine without GPUs too: the processes then run on its CPUs and talk over gloo), or set it up "
    "once with `accelerate config`; `accelerate launch --num_processes N` without --multi_gpu, or with --cpu, "
    "starts a single process."
)
# What the forkserver of `forkserver_context` imports once, before it starts any worker: the caller's script (a
# guarded `train.py`), the loaders' module (torch, datasets) and the processor that the collator pickles.
FORKSERVER_PRELOAD = ["__main__", "fiberbench.training.inputs", "fiberbench.modeling.processing_fiber"]


def check_launch() -> None:
    """A `UsageError` for `accelerate launch` given several processes that started one (`--num_processes N` without
    `--multi_gpu`, or with `--cpu`): read from the environment the launcher gave this process."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1 and "MASTER_ADDR" in os.environ and "ACCELERATE_MIXED_PRECISION" in os.environ:
        raise UsageError(f"`accelerate launch` was given several processes but started one: {HOW_TO_LAUNCH}")


def make_accelerator(args: argparse.Namespace) -> Accelerator:
    """The `Accelerator`, after making sure the launched processes form one group (else a `UsageError`); `train.py`
    has made `check_launch` before.

    On a machine without GPUs, processes started by `--multi_gpu` run as CPU processes over gloo
    (Accelerate would otherwise start each as a run of its own, all writing the same outputs).
    """
    import accelerate
    import torch
    from accelerate import Accelerator, DataLoaderConfiguration
    from accelerate.utils import DistributedType, ProjectConfiguration, parse_flag_from_env

    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    on_gpu = torch.cuda.is_available() and not parse_flag_from_env("ACCELERATE_USE_CPU")
    accelerator = Accelerator(
        cpu=world_size > 1 and not torch.cuda.is_available(),
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        # "auto" is bf16 on a GPU that has it, else Accelerate's own setting; read before the
        # Accelerator exists, as creating accelerate's state first would fix it before ACCELERATE_USE_CPU applies.
        mixed_precision=("bf16" if on_gpu and torch.cuda.is_bf16_supported() else None)
        if args.mixed_precision == "auto"
        else args.mixed_precision,
        dynamo_backend=args.torch_compile_backend if args.torch_compile else None,
        log_with=args.report_to if args.with_tracking else None,
        # TensorBoard writes into logs/PROJECT: one entry of the run's, whatever the project is named.
        project_config=ProjectConfiguration(project_dir=args.output_dir, logging_dir=Path(args.output_dir) / LOGS_FOLDER),
        # A sampler seeded per epoch: the same order on every process, and after a resume.
        dataloader_config=DataLoaderConfiguration(
            use_seedable_sampler=True, data_seed=args.seed, non_blocking=torch.cuda.is_available()
        ),
    )
    if accelerator.num_processes != world_size:
        raise UsageError(
            f"{world_size} processes were launched but they do not form one group (this one sees "
            f"{accelerator.num_processes}): {HOW_TO_LAUNCH}"
        )
    for name, wanted in (("FSDP", DistributedType.FSDP), ("DeepSpeed", DistributedType.DEEPSPEED)):
        if parse_flag_from_env(f"ACCELERATE_USE_{name.upper()}") and accelerator.distributed_type != wanted:
            raise UsageError(
                f"{name} was asked for, but Accelerate {accelerate.__version__} runs these processes as "
                f"{accelerator.distributed_type.value}: it shards only across GPUs, and on CPUs would silently "
                f"train unsharded. Run {name} on GPUs, or launch without it."
            )
    return accelerator


def setup_logging(accelerator: Accelerator) -> None:
    """INFO logs from this script on the main process; library warnings only, and errors only elsewhere."""
    import datasets
    import transformers

    from fiberbench.cli import configure_logging

    configure_logging()
    if accelerator.is_local_main_process:
        datasets.utils.logging.set_verbosity_warning()
        transformers.utils.logging.set_verbosity_warning()
    else:
        datasets.utils.logging.set_verbosity_error()
        transformers.utils.logging.set_verbosity_error()
        # The data's warnings too (the SYNTHETIC sample's, each process loading it): said once, not per process. The
        # run's own lines stay: each process says which it is.
        logging.getLogger("fiberbench.data").setLevel(logging.ERROR)
    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()


def forkserver_context() -> multiprocessing.context.BaseContext | None:
    """The start of loader workers in a process with a thread that talks to the Hub: from a forkserver, not forked.

    A forked worker inherits every lock that another thread held at the fork, and `huggingface_hub` closes its HTTP
    client in each forked child (`os.register_at_fork`), which takes the lock of the client's connection pool: a
    worker forked while a push held that lock waits for it forever, and the run with it. A forkserver is a process
    of its own, without threads, started by fork and exec; the workers are forked from it.

    The forkserver starts now and imports `FORKSERVER_PRELOAD` (seconds) while the caller goes on; each worker then
    starts without importing torch again. Like spawn, it imports the caller's script: one with an
    `if __name__ == "__main__":` guard, as `train.py` has. None where the platform has no forkserver (Windows):
    workers are spawned there, never forked.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return None
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(FORKSERVER_PRELOAD)
    multiprocessing.forkserver.ensure_running()
    return context


def pushes_while_training(args: argparse.Namespace) -> bool:
    """Whether the run pushes each save (a new best model, a checkpoint) to the Hub while it trains: a model it trains
    with --push_to_hub and a --hub_strategy other than end (the main process pushes, in a thread of its own)."""
    return args.push_to_hub and args.hub_strategy != "end" and args.do_train and args.baseline is None


def loader_worker_context(args: argparse.Namespace) -> multiprocessing.context.BaseContext | None:
    """How this process's data loader workers start: from the forkserver of `forkserver_context` (started at the
    first call) on the process that pushes while it trains (the main one, RANK 0) unless --dataloader_num_workers is
    0; forked elsewhere (None). train.py calls it first before torch loads, so that the forkserver's imports run
    beside this process's own, not while the first batch is awaited."""
    if pushes_while_training(args) and args.dataloader_num_workers != 0 and int(os.environ.get("RANK", "0")) == 0:
        return forkserver_context()
    return None
