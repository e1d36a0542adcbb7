"""The `fiberbench` command line: one subcommand per data, scoring, prediction and sharing job."""

import argparse
import importlib
import logging
import os
import sys
from functools import partial
from pathlib import Path

from . import __version__
from .errors import UsageError, alike_on_every_process, describe, run_reporting_errors

# Subcommand -> (module, one-line help). Each module has `add_arguments(parser)` and `run(args)`; only the one named
# is imported (`build_parser`), so that `fiberbench --help` loads no command's libraries (bench/cli.py measures it).
COMMANDS = {
    "build-dataset": ("fiberbench.data.build", "Build FIBER (or data in its release format) into a dataset folder."),
    "blank": ("fiberbench.data.blanking", "Blank one noun phrase per clip of captioning data, as the release did."),
    "hit-inputs": ("fiberbench.data.hits", "The crowd tasks' input CSV (Mechanical Turk HITs) for the annotation page."),
    "answers": ("fiberbench.data.answers", "Merge crowd answers into the release format's additional_answers."),
    "agreement": ("fiberbench.data.agreement", "Human agreement (the paper's Table 2) of a release-format file."),
    "stats": ("fiberbench.data.stats", "Answer statistics (the paper's Table 1, gender words, answers, POS)."),
    "evaluate": ("fiberbench.metric.evaluate.command", "Score systems' predictions files: intervals, paired tests."),
    "leaderboard": ("fiberbench.leaderboard.command", "Build (and push) the FIBER leaderboard Space from a store."),
    "predict": ("fiberbench.predict.command", "Run a Hub model (seq2seq, causal, FIBER, video LLM) on a FIBER split."),
    "clips": ("fiberbench.predict.clips", "Which clips of a split have a video in a folder: a manifest."),
    "extract-features": ("fiberbench.data.features.command", "Video features of every clip, for build-dataset."),
    "lmms-eval-task": ("fiberbench.lmms_eval_tasks.command", "The folder of FIBER's lmms-eval task."),
    "push-metric": ("fiberbench.metric.push", "Push the fiber_metric module to the Hub as a Space."),
}
# A command whose flags are in a light module (no torch): its `add_arguments(parser)`, and its `check(args)`, which runs
# before the command's module is imported (a mistyped folder or an unreachable Hub is one line in a second) and returns
# the arguments the command runs with, what it found added.
FLAGS_MODULES = {"predict": "fiberbench.predict.arguments", "extract-features": "fiberbench.data.features.arguments"}


class OneLineErrorParser(argparse.ArgumentParser):
    """The ArgumentParser of every command line (`fiberbench` and its subcommands, `training/train.py`): a bad flag
    value, a missing or unknown argument is a `UsageError`, one line with exit status 2 pointing at --help. It raises
    rather than exits, so that a caller can say where the arguments came from (train.py names a YAML config file);
    the error's `prog` is the parser that refused them ("fiberbench evaluate"), which `main` names.
    """

    def error(self, message: str):
        error = UsageError(f"{message} (see {self.prog} --help)")
        error.prog = self.prog
        raise error


def add_output_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup, output_help: str,
                         overwrite_help: str, folder: bool = False, required: bool = True,
                         default: Path | None = None) -> None:
    """Declare a command's output flags, as the transformers example scripts name them: `--output_file` and
    `--overwrite_output_file`, or with `folder`, `--output_dir` and `--overwrite_output_dir`.

    The output is written through `fiberbench.outputs`, which refuses to replace what another run wrote
    unless the overwrite flag is given: `overwrite_help` says what it replaces.
    """
    name = "output_dir" if folder else "output_file"
    parser.add_argument(f"--{name}", type=Path, required=required, default=default, help=output_help)
    parser.add_argument(f"--overwrite_{name}", action="store_true", help=overwrite_help)


def add_video_dir_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup, use: str,
                           required: bool = False) -> None:
    """Declare `--video_dir`, the folder of clip videos that `fiberbench.videos.find_clip_video` reads; its help says
    what the command reads them for (`use`), then the file names looked for."""
    parser.add_argument("--video_dir", type=Path, required=required, default=None,
                        help=f"{use}: VIDEO_ID_START_END.mp4 (clip ids) or whole VIDEO_ID.mp4 (or .mkv, .webm).")


def positive_int(text: str) -> int:
    """argparse type of counts and sizes: an integer of at least 1 (a bad value is argparse's one-line error)."""
    return _integer(text, minimum=1, rule="must be at least 1")


def positive_float(text: str) -> float:
    """argparse type of rates: a finite number above 0 (an infinite or NaN learning rate trains to NaN weights)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number greater than 0, got {text}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type of worker counts and warm-up steps: an integer >= 0."""
    return _integer(text, minimum=0, rule="must be 0 or more")


def seed(text: str) -> int:
    """argparse type of random seeds: an integer that NumPy accepts, from 0 to 2**32 - 1."""
    value = non_negative_int(text)
    if value >= 2**32:
        raise argparse.ArgumentTypeError(f"must be below 2**32, got {value}")
    return value


def _integer(text: str, minimum: int, rule: str) -> int:
    """`text` as an integer of at least `minimum`; else argparse's one-line error, saying `rule`."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{rule}, got {value}")
    return value


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    """The parser; only the subcommand named in `argv` is imported."""
    parser = OneLineErrorParser(
        prog="fiberbench",
        description="FIBER, the video fill-in-the-blanks benchmark: data, scoring and tools.",
    )
    parser.add_argument("--version", action="version", version=f"fiberbench {__version__}")
    parser.add_argument("--debug", action="store_true", help="Show the traceback of a user error (also: "
                        "FIBERBENCH_DEBUG=1); by default it is one line.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                       parser_class=OneLineErrorParser)
    for name, (module_name, help_text) in COMMANDS.items():
        subparser = subparsers.add_parser(name, help=help_text, description=help_text)
        if name in argv:
            flags = importlib.import_module(FLAGS_MODULES.get(name, module_name))
            flags.add_arguments(subparser)
            check = flags.check if name in FLAGS_MODULES else None
            subparser.set_defaults(run=partial(run_command, module_name, check))
    return parser


def run_command(module_name: str, check, args: argparse.Namespace) -> int | None:
    """A command's light `check` (alike on every process of a launch: a refusal is said once), then its `run` with the
    arguments the check returned."""
    if check is not None:
        with alike_on_every_process():
            args = check(args)
    return importlib.import_module(module_name).run(args)


class StderrHandler(logging.StreamHandler):
    """A handler writing to whatever `sys.stderr` is when a record comes (it may be replaced after start-up)."""

    def __init__(self):
        super().__init__()
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _):
        """StreamHandler sets its stream at construction; the current `sys.stderr` is used instead."""


def configure_logging() -> None:
    """INFO logs of fiberbench's own modules on stderr, once.

    Only the `fiberbench` logger gets a handler: huggingface_hub, transformers and datasets have
    their own, and a handler on the root logger printed each of their warnings twice.
    """
    logger = logging.getLogger("fiberbench")
    if not any(isinstance(handler, StderrHandler) for handler in logger.handlers):
        logger.addHandler(StderrHandler())
    logger.setLevel(logging.INFO)


def main(argv: list[str] | None = None) -> int:
    """Run `fiberbench ARGV`; returns the exit status (0, 1 for a data error, 2 for a usage error)."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except UsageError as error:  # OneLineErrorParser's: exits as argparse does, naming the (sub)command refused
        parser.exit(error.exit_status, f"{getattr(error, 'prog', parser.prog)}: error: {describe(error)}\n")
    configure_logging()
    try:
        return run_reporting_errors(lambda: args.run(args), prog=f"fiberbench {args.command}", debug=args.debug)
    finally:
        end_process_group()


def end_process_group() -> None:
    """Close the process group of a command run under `accelerate launch` (predict, extract-features) before the
    interpreter exits: left to the interpreter's teardown, gloo's threads can abort a finished process."""
    distributed = sys.modules.get("torch.distributed")  # never imported here: --help stays fast
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        distributed.destroy_process_group()


MAX_DEFAULT_WORKERS = 8


def default_num_workers(processes_per_machine: int = 1) -> int:
    """The default of every `--dataloader_num_workers` (training, predict, extract-features): a process's share of
    this machine's CPU cores, less one for the model's own work, and at most `MAX_DEFAULT_WORKERS`."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(0, min(MAX_DEFAULT_WORKERS, cores // max(processes_per_machine, 1) - 1))


def arguments_of(args: argparse.Namespace) -> dict:
    """A command's parsed flags as the record of its output keeps them: paths as text; tokens and the dispatch out."""

    def plain(value):
        if isinstance(value, list | tuple):
            return [plain(item) for item in value]
        return os.fspath(value) if isinstance(value, os.PathLike) else value

    return {name: plain(value) for name, value in vars(args).items() if name != "run" and "token" not in name}


if __name__ == "__main__":
    sys.exit(main())
