"""Command-line arguments of `training/train.py`, with YAML config files and checks that run before any work.

The argparse defaults are the one source of truth and reproduce the paper's setup (App. B.1). A
`--config FILE.yaml` replaces defaults, and flags given on the command line replace the file.
With neither a model nor a dataset given, `configs/sample_demo.yaml` is layered under the user's
config: the main job, which trains a tiny model on the bundled sample in a few minutes on a CPU.

This module loads neither torch nor transformers (the model's fusions are written out, `FUSIONS`): the script
answers --help and refuses a mistyped flag or path at once.
"""

import argparse
import dataclasses
import math
from pathlib import Path

import yaml

from fiberbench.cli import OneLineErrorParser, non_negative_int, positive_float, positive_int, seed
from fiberbench.errors import DataError, UsageError, quoted

# The script's name in its messages ("train.py: error: ..."), however it is started.
PROG = "train.py"
CONFIGS_DIR = Path(__file__).resolve().parent / "configs"
SAMPLE_DEMO_CONFIG = CONFIGS_DIR / "sample_demo.yaml"

BASELINES = ("most_frequent_answer",)
MIXED_PRECISIONS = ("auto", "no", "fp16", "bf16")
# transformers' schedulers (`SchedulerType`) that `get_scheduler` builds from the warm-up and the length alone, as
# this script calls it (the others need scheduler kwargs or a metric at each step); written out, as in the HF
# example scripts, so that --help needs no transformers (tests/training/test_arguments.py builds each one).
LR_SCHEDULER_TYPES = (
    "linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup", "inverse_sqrt"
)
# The model's fusions (`fiberbench.modeling.FUSIONS`), written out so that reading --fusion (which the main job's
# config sets) loads neither torch nor transformers: a refused run is refused at once (tests/training/test_arguments.py
# checks they are the model's).
FUSIONS = ("none", "early", "late")
# What --push_to_hub pushes, and when, as the Trainer's `hub_strategy` (see `fiberbench.training.hub_checkpoints`).
HUB_STRATEGIES = ("end", "every_save", "checkpoint", "all_checkpoints")
# The repo folder of the latest checkpoint with --hub_strategy checkpoint (the Trainer's name), which
# --resume_from_checkpoint REPO_ID resumes.
LAST_CHECKPOINT = "last-checkpoint"
# The arguments that may differ between a run and its resumption: where its outputs go, how they are shown,
# shared or read in, and the final test evaluation. Every other one shapes what is trained, and a checkpoint
# resumes only with the values it was saved with (`training_settings`).
NOT_TRAINING_SETTINGS = frozenset(
    {
        "config", "config_path", "sample_demo", "output_dir", "overwrite_output_dir", "resume_from_checkpoint",
        "trust_checkpoint", "checkpointing_steps", "with_tracking", "report_to", "tracker_project_name",
        "push_to_hub", "hub_model_id", "hub_token", "hub_strategy", "hub_revision", "dataloader_num_workers",
        "per_device_eval_batch_size", "do_predict",
    }
)


def fusion(text: str) -> str:
    """argparse type: one of the model's fusions (`FUSIONS`)."""
    if text not in FUSIONS:
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(map(repr, FUSIONS))})")
    return text


def non_negative_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    value = float(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number of 0 or more, got {text}")
    return value


def checkpointing_steps(text: str) -> str | int:
    """argparse type: "epoch" or a positive number of optimizer steps, as in the HF example scripts."""
    return text if text == "epoch" else positive_int(text)


def switch(default: bool) -> dict:
    """argparse options of a true/false flag, which also has a --no- form (`--no-do_train`)."""
    return {"action": argparse.BooleanOptionalAction, "default": default}


# The flags by group: flag -> (help, argparse options), spelled as in the HF example scripts. A flag without a
# `default` defaults to None: the help says what that stands for.
FLAGS = {
    "data": {
        "--dataset_name": (
            "Hub id or local folder of a FIBER-format dataset; default: the sample bundled with the package.",
            {},
        ),
        "--dataset_config_name": ('Dataset config; default: "i3d" when the model fuses video, else "text".', {}),
        "--single_feature": (
            "Use only the I3D feature around the 3rd second of each clip (the paper's 1f variants).",
            switch(False),
        ),
        "--dataloader_num_workers": (
            "Processes that read and tokenize batches beside each training process (0: in the training "
            "process); default: the CPU cores each process has, less one for the step itself, at most 8.",
            {"type": non_negative_int},
        ),
        "--group_by_length": (
            "Batch training examples of similar length (caption tokens plus video frames) so padding is small.",
            switch(False),
        ),
    },
    "model": {
        "--model_name_or_path": (
            "T5 or FIBER checkpoint (Hub id or folder, safetensors weights); default: a tiny model "
            "built from the shipped tokenizer.",
            {},
        ),
        "--config_overrides": (
            'For the tiny model only: comma-separated config settings, e.g. "d_model=64,num_layers=2".',
            {},
        ),
        "--fusion": (
            'Video fusion: "none" (text only), "early" (T5 + I3D) or "late" (two-stream); default: the '
            'checkpoint\'s own for a FIBER checkpoint, else "early".',
            {"type": fusion},
        ),
        "--baseline": (
            "Run a baseline instead of a model: the training set's most frequent answer for every blank.",
            {"choices": BASELINES},
        ),
    },
    "training": {
        "--do_train": ("Train.", switch(True)),
        "--per_device_train_batch_size": (None, {"type": positive_int, "default": 64}),
        "--learning_rate": (None, {"type": positive_float, "default": 1e-4}),
        "--weight_decay": ("0 makes AdamW the paper's Adam.", {"type": non_negative_float, "default": 0.0}),
        "--num_train_epochs": (None, {"type": positive_int, "default": 10}),
        "--max_train_steps": (
            "Total optimizer steps; overrides --num_train_epochs and sets the learning-rate schedule's length.",
            {"type": positive_int},
        ),
        "--gradient_accumulation_steps": (None, {"type": positive_int, "default": 1}),
        "--lr_scheduler_type": (
            "transformers' learning-rate schedule: %(choices)s.",
            {"choices": LR_SCHEDULER_TYPES, "metavar": "TYPE", "default": "linear"},
        ),
        "--num_warmup_steps": (
            "Warm-up optimizer steps; default: one epoch, as in the paper.",
            {"type": non_negative_int},
        ),
        "--seed": (None, {"type": seed, "default": 42}),
        "--mixed_precision": (
            '"auto": bf16 on a GPU that has it, else whatever `accelerate launch` was given.',
            {"choices": MIXED_PRECISIONS, "default": "auto"},
        ),
        "--torch_compile": (
            "Compile the model's training step with torch.compile (evaluation runs uncompiled).",
            switch(False),
        ),
        "--torch_compile_backend": (
            'torch.compile backend for --torch_compile ("inductor"; "aot_eager" needs no compiler).',
            {"default": "inductor"},
        ),
    },
    "evaluation and decoding": {
        "--do_eval": (
            "Evaluate on the validation split after each epoch (and once without training).",
            switch(True),
        ),
        "--do_predict": ("Evaluate the final model on the test split.", switch(True)),
        "--per_device_eval_batch_size": (None, {"type": positive_int, "default": 64}),
        "--num_beams": (
            "Beam size; default: the model's generation config (the paper's: early 4, late 8, text only 2).",
            {"type": positive_int},
        ),
        "--only_noun_phrases": (
            "Answer with the first beam that is a noun phrase (else the first beam), as in the paper.",
            switch(True),
        ),
        "--spacy_model": (
            "spaCy pipeline of the noun-phrase check; default: $FIBERBENCH_SPACY_MODEL, else en_core_web_trf "
            "(falling back with a warning to an installed English one).",
            {},
        ),
    },
    "outputs, checkpoints and sharing": {
        "--output_dir": (
            "Where results and the model are written: a new or empty folder, or one of this script's runs "
            "with --overwrite_output_dir or --resume_from_checkpoint.",
            {"default": "outputs/fiber"},
        ),
        "--overwrite_output_dir": (
            "Replace the outputs of a previous run of this script in --output_dir (and nothing else).",
            switch(False),
        ),
        "--checkpointing_steps": (
            'Save the training state every N optimizer steps, or "epoch" after each epoch.',
            {"type": checkpointing_steps},
        ),
        "--resume_from_checkpoint": (
            "A step_N or epoch_N folder written by --checkpointing_steps, or a Hub repo pushed with --hub_strategy "
            "checkpoint (REPO_ID: its last-checkpoint/) or all_checkpoints (REPO_ID:step_N); training continues "
            "where it stopped, on as many processes.",
            {},
        ),
        "--hub_revision": (
            "The branch, tag or commit of the Hub repo given to --resume_from_checkpoint; default: main.",
            {},
        ),
        "--trust_checkpoint": (
            "Resume from a sharded FSDP checkpoint (torch's distributed format unpickles): only one you wrote.",
            {"action": "store_true"},
        ),
        "--with_tracking": ("Log metrics to --report_to.", switch(False)),
        "--report_to": (
            'Tracker(s) for Accelerate, e.g. "tensorboard", "wandb", "all".',
            {"default": "tensorboard"},
        ),
        "--tracker_project_name": (
            "The trackers' project name (TensorBoard: the folder under --output_dir that holds the logs).",
            {"default": "fiber"},
        ),
        "--push_to_hub": (
            "Push the model with its model card to the Hub: at the end, or as --hub_strategy says.",
            switch(False),
        ),
        "--hub_strategy": (
            "With --push_to_hub, as the Trainer's hub_strategy: end (the final model), every_save (also the model "
            "and its card at each save), checkpoint (also the latest checkpoint, in last-checkpoint/), "
            "all_checkpoints (also every checkpoint, each in its own folder). Pushes during training run in the "
            "background.",
            {"choices": HUB_STRATEGIES, "default": "end"},
        ),
        "--hub_model_id": ("Repo id; default: the output folder's name.", {}),
        "--hub_token": ("Hub token; default: HF_TOKEN or the saved login.", {}),
    },
}


def build_parser() -> OneLineErrorParser:
    """The parser of `FLAGS`, and --config; every true/false flag also has a --no- form.

    Its errors are `UsageError`s, from the command line and a YAML config file alike (`read_config`).
    """
    parser = OneLineErrorParser(
        prog=PROG,
        description="Train and evaluate a FIBER model (T5 with optional I3D fusion) with Accelerate.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        # A misspelt flag is an error, not silently read as the flag it abbreviates.
        allow_abbrev=False,
    )
    parser.add_argument(
        "--config",
        help="A YAML file (or the name of one in training/configs/, e.g. t5_i3d) whose keys are this "
        "script's flags; flags on the command line override it.",
    )
    for title, flags in FLAGS.items():
        group = parser.add_argument_group(title)
        for flag, (help_text, options) in flags.items():
            group.add_argument(flag, help=help_text, **options)
    return parser


def resolve_config_path(name: str) -> Path:
    """`name` as a path, or as a config shipped in training/configs/ (with or without ".yaml")."""
    candidates = [Path(name), CONFIGS_DIR / name, CONFIGS_DIR / f"{name}.yaml"]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise UsageError(
        f"--config {name}: no such file, and no config of that name in {CONFIGS_DIR} "
        f"(shipped: {', '.join(sorted(path.stem for path in CONFIGS_DIR.glob('*.yaml')))})"
    )


def read_config(path: Path) -> dict:
    """The YAML file's settings, typed and checked by the parser itself.

    argparse applies neither `type` nor `choices` to defaults, so the settings are turned back
    into flags and parsed: a YAML value gets exactly the checks a command-line value gets, and an
    unknown key is an error rather than silently ignored.
    """
    try:
        with open(path, encoding="utf-8") as file:
            settings = yaml.safe_load(file) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise UsageError(f"{path}: not a readable YAML file: {error}") from error
    if not isinstance(settings, dict):
        raise UsageError(f"{path}: expected a mapping of flag names to values, got a {type(settings).__name__}")
    parser = build_parser()
    known = set(vars(parser.parse_args([]))) - {"config"}
    unknown = sorted(set(map(str, settings)) - known)
    if unknown:
        raise UsageError(f"{path}: unknown key(s) {', '.join(unknown)}; valid keys are the flags of train.py.")
    flags = []
    for key, value in settings.items():
        if isinstance(value, bool):
            flags.append(f"--{key}" if value else f"--no-{key}")
        elif isinstance(value, (list, dict)):
            raise UsageError(f"{path}: {key} must be a single value, got {quoted(value)}")
        elif value is not None:
            # One token, so that a negative number is read as the value, not as a flag.
            flags.append(f"--{key}={value}")
    try:
        parsed = parser.parse_args(flags)
    except UsageError as error:
        raise UsageError(f"{path}: {error}") from error
    return {key: getattr(parsed, key) for key in settings}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse flags over the optional --config file; with no model and no dataset, over the sample demo.

    Sets `args.sample_demo` (whether the demo config was layered in) and `args.config_path`.
    Raises `UsageError` for a bad flag, config file or combination, before any work.
    """
    parser = build_parser()
    config_name = parser.parse_known_args(argv)[0].config
    config_path = resolve_config_path(config_name) if config_name else None
    user_settings = read_config(config_path) if config_path else {}
    parser.set_defaults(**user_settings)
    args = parser.parse_args(argv)
    check_paths(args)  # before the demo's settings, whose choices (fusion) load the model's libraries
    args.sample_demo = args.model_name_or_path is None and args.dataset_name is None
    if args.sample_demo and config_path != SAMPLE_DEMO_CONFIG:
        parser.set_defaults(**{**read_config(SAMPLE_DEMO_CONFIG), **user_settings})
        args = parser.parse_args(argv)
        args.sample_demo = True
    args.config_path = str(config_path) if config_path else None
    check_args(args)
    return args


def check_args(args: argparse.Namespace) -> None:
    """Fail on argument combinations that cannot work, before anything is loaded or trained."""
    if not (args.do_train or args.do_eval or args.do_predict):
        raise UsageError("Nothing to do: --no-do_train, --no-do_eval and --no-do_predict were all given.")
    if args.resume_from_checkpoint is not None:
        if not args.do_train:
            raise UsageError("--resume_from_checkpoint resumes training; it cannot be used with --no-do_train.")
    elif args.trust_checkpoint:
        raise UsageError("--trust_checkpoint applies to --resume_from_checkpoint, which was not given.")
    if args.hub_revision is not None and hub_checkpoint(args) is None:
        raise UsageError("--hub_revision applies to a Hub repo given to --resume_from_checkpoint, which was not given.")
    if args.baseline is not None and args.model_name_or_path is not None:
        raise UsageError(f"--baseline {args.baseline} uses no model; drop --model_name_or_path.")
    if args.config_overrides is not None and args.model_name_or_path is not None:
        raise UsageError(
            "--config_overrides applies to the tiny model built from scratch, not to --model_name_or_path."
        )
    name = args.tracker_project_name
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise UsageError(f"--tracker_project_name {name!r}: must be a plain folder name.")
    if args.push_to_hub:
        check_push(args)
    elif args.hub_strategy != "end":
        raise UsageError(f"--hub_strategy {args.hub_strategy} says when --push_to_hub pushes, which was not given.")


def check_paths(args: argparse.Namespace) -> None:
    """A `DataError` for a checkpoint folder that is not there, or a --dataset_name or --model_name_or_path that is
    neither a folder nor a possible Hub id: checked before the heavy libraries load, without the network (but for
    a checkpoint on the Hub, which the Hub is asked for: a mistyped folder is often a possible repo id too)."""
    from fiberbench.data.loading import check_dataset_name
    from fiberbench.models import check_model_name

    if args.resume_from_checkpoint is not None and not Path(args.resume_from_checkpoint).is_dir():
        source = hub_checkpoint(args)
        if source is None:
            raise DataError(
                f"--resume_from_checkpoint {args.resume_from_checkpoint}: no such checkpoint folder (and not a Hub "
                "repo, REPO_ID or REPO_ID:FOLDER)."
            )
        source.check()
    if args.dataset_name is not None:
        check_dataset_name(args.dataset_name)
    if args.model_name_or_path is not None and not Path(args.model_name_or_path).expanduser().exists():
        check_model_name(args.model_name_or_path, flag="--model_name_or_path")


def training_settings(args: argparse.Namespace) -> dict:
    """The arguments that shape what a run trains (all but `NOT_TRAINING_SETTINGS`): saved in every checkpoint and
    compared on resume."""
    return {
        name: str(value) if isinstance(value, Path) else value
        for name, value in vars(args).items()
        if name not in NOT_TRAINING_SETTINGS
    }


def hub_repo_id(args: argparse.Namespace) -> str:
    """--hub_model_id, else the output folder's name, as in the HF example scripts."""
    return args.hub_model_id or Path(args.output_dir).resolve().name


def check_push(args: argparse.Namespace) -> None:
    """What --push_to_hub needs, checked before training rather than after it."""
    from fiberbench.hub import HubPushError, check_can_push

    if args.baseline is not None or not args.do_train:
        raise UsageError("--push_to_hub pushes the model this run trains; it needs training (and no --baseline).")
    if args.hub_strategy in ("checkpoint", "all_checkpoints") and args.checkpointing_steps is None:
        raise UsageError(
            f"--hub_strategy {args.hub_strategy} pushes the checkpoints of --checkpointing_steps, which was not given."
        )
    try:
        check_can_push(hub_repo_id(args), args.hub_token)
    except HubPushError as error:
        raise UsageError(f"--push_to_hub: {error}") from error


@dataclasses.dataclass(frozen=True)
class HubCheckpoint:
    """A checkpoint folder of a Hub model repo: --resume_from_checkpoint REPO_ID[:FOLDER] --hub_revision REV."""

    repo_id: str
    folder: str = LAST_CHECKPOINT
    revision: str | None = None

    @classmethod
    def parse(cls, name: str, revision: str | None = None) -> "HubCheckpoint | None":
        """`REPO_ID` (its `last-checkpoint/`) or `REPO_ID:FOLDER`; None when `name` reads as neither (no network)."""
        from fiberbench.hub import is_hub_id

        repo_id, _, folder = name.partition(":")
        folder = folder.strip("/") or LAST_CHECKPOINT
        if not is_hub_id(repo_id) or "\\" in folder or any(part in ("", ".", "..") for part in folder.split("/")):
            return None
        return cls(repo_id, folder, revision)

    def check(self) -> None:
        """A `DataError` unless the Hub has the repo (and revision), asked within seconds: the repo id may be a
        mistyped folder."""
        from fiberbench.hub import hub_problem

        problem = hub_problem(self.repo_id, revision=self.revision)
        if problem is not None:
            raise DataError(f"--resume_from_checkpoint {self.given}: no such checkpoint folder, and {problem}")

    @property
    def given(self) -> str:
        """The checkpoint as --resume_from_checkpoint names it."""
        return self.repo_id if self.folder == LAST_CHECKPOINT else str(self)

    def __str__(self) -> str:
        return f"{self.repo_id}:{self.folder}"


def hub_checkpoint(args: argparse.Namespace) -> HubCheckpoint | None:
    """The Hub checkpoint --resume_from_checkpoint names (with --hub_revision), or None for a local folder.

    Read without the network: a name that is no local folder must read as REPO_ID or REPO_ID:FOLDER.
    """
    name = args.resume_from_checkpoint
    if name is None or Path(name).is_dir():
        return None
    return HubCheckpoint.parse(name, revision=args.hub_revision)
