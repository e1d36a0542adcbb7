"""The arguments of `training/train.py`: FIBER's dataclasses, `Seq2SeqTrainingArguments` with the paper's recipe as
defaults, and `--config NAME` (a YAML file of flags, or one of training/configs/) under the command line."""

import math
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import torch
import yaml
from transformers import HfArgumentParser, Seq2SeqTrainingArguments

from fiberbench.errors import UsageError, quoted

PROG = "train.py"
CONFIGS_DIR = Path(__file__).resolve().parent / "configs"
SAMPLE_DEMO_CONFIG = CONFIGS_DIR / "sample_demo.yaml"
# The Trainer's arguments that shape what a run trains: a checkpoint resumes only with the values it was saved with.
TRAINING_SETTINGS = ("learning_rate", "weight_decay", "optim", "per_device_train_batch_size", "world_size", "seed",
                     "gradient_accumulation_steps", "num_train_epochs", "max_steps", "lr_scheduler_type",
                     "warmup_steps")


def argument(default, help_text: str):
    return field(default=default, metadata={"help": help_text})


@dataclass
class ModelArguments:
    config: str | None = argument(None, "A YAML file of flags, or one of training/configs/ (e.g. t5_i3d).")
    model_name_or_path: str | None = argument(None, "T5 or FIBER checkpoint; default: a tiny model, from scratch.")
    config_overrides: str | None = argument(None, 'The tiny model\'s config, e.g. "d_model=64,num_layers=2".')
    fusion: Literal["none", "early", "late"] | None = argument(None, "Default: the checkpoint's, else early.")
    single_feature: bool = argument(False, "Only the feature around each clip's 3rd second (the paper's 1f).")
    num_beams: int | None = argument(None, "Beams; default: the model's (the paper's: early 4, late 8, text 2).")
    only_noun_phrases: bool = argument(True, "Answer with the first beam that is a noun phrase, as the paper.")
    spacy_model: str | None = argument(None, "Its spaCy pipeline; default: $FIBERBENCH_SPACY_MODEL or en_core_web_trf.")
    baseline: Literal["most_frequent_answer"] | None = argument(None, "A baseline instead of a model.")


    def __post_init__(self):
        if self.num_beams is not None and self.num_beams < 1:
            raise ValueError(f"--num_beams: must be at least 1, got {self.num_beams}")


@dataclass
class DataArguments:
    dataset_name: str | None = argument(None, "Hub id or folder of a FIBER dataset; default: the bundled sample.")
    dataset_config_name: str | None = argument(None, 'Default: "text", or a fusion model\'s features ("i3d").')


@dataclass
class FiberTrainingArguments(Seq2SeqTrainingArguments):
    """`Seq2SeqTrainingArguments` whose defaults are the paper's recipe (App. B.1): AdamW without weight decay (Adam),
    no gradient clipping, batch 64, 10 epochs, learning rate 1e-4, linear decay after an epoch of warm-up (unless
    --warmup_steps); validation each epoch, keeping the model of the best validation F1. And FIBER's own settings."""

    output_dir: str = "outputs/fiber"
    overwrite_output_dir: bool = argument(False, "Replace an earlier run of train.py there (only what it wrote).")
    trust_checkpoint: bool = argument(False, "Resume from pickles beyond tensors (FSDP's): only ones you wrote.")
    do_train: bool = True
    do_eval: bool = True
    do_predict: bool = True
    per_device_train_batch_size: int = 64
    per_device_eval_batch_size: int = 64
    learning_rate: float = 1e-4
    num_train_epochs: float = 10.0
    max_grad_norm: float = 0.0
    eval_strategy: str = "epoch"
    save_strategy: str = "epoch"
    logging_strategy: str = "epoch"
    save_total_limit: int | None = 1
    load_best_model_at_end: bool = True
    metric_for_best_model: str = "f1"
    predict_with_generate: bool = True
    remove_unused_columns: bool = False
    bf16: bool | None = argument(None, "bf16 mixed precision; default: on a GPU that supports it.")

    def __post_init__(self):
        if not self.do_eval:  # nothing chooses a best model: the last one is the run's
            self.eval_strategy, self.load_best_model_at_end = "no", False
        if self.disable_tqdm is None:  # a log that is not a terminal gets the Trainer's log lines, not bar fragments
            self.disable_tqdm = not sys.stderr.isatty()
        self.dataloader_pin_memory = self.dataloader_pin_memory and torch.cuda.is_available()
        if self.bf16 is None:
            self.bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        for name in ("learning_rate", "num_train_epochs", "per_device_train_batch_size", "per_device_eval_batch_size"):
            if not 0 < getattr(self, name) < math.inf:
                raise ValueError(f"--{name}: must be a finite number greater than 0, got {getattr(self, name)}")
        if not 0 <= self.seed < 2**32:
            raise ValueError(f"--seed: must be from 0 to 2**32 - 1 (NumPy's seeds), got {self.seed}")
        super().__post_init__()


class ArgumentParser(HfArgumentParser):
    """`HfArgumentParser` whose errors are one-line `UsageError`s (exit 2), a misspelt flag one of them."""

    def __init__(self):
        super().__init__((ModelArguments, DataArguments, FiberTrainingArguments), prog=PROG, allow_abbrev=False)

    def error(self, message: str):
        raise UsageError(f"{message} (see {PROG} --help)")


def config_path(name: str) -> Path:
    """`name` as a file, or as a config of training/configs/ (with or without ".yaml")."""
    for path in (Path(name), CONFIGS_DIR / name, CONFIGS_DIR / f"{name}.yaml"):
        if path.is_file():
            return path.resolve()
    shipped = ", ".join(sorted(path.stem for path in CONFIGS_DIR.glob("*.yaml")))
    raise UsageError(f"--config {name}: no such file, and no config of that name in {CONFIGS_DIR} (shipped: {shipped})")


def config_flags(parser: ArgumentParser, path: Path) -> list[str]:
    """A YAML config file's settings as flags, checked by the parser as flags are (an error names the file)."""
    try:
        settings = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise UsageError(f"{path}: not a readable YAML file: {' '.join(str(error).split())}") from error
    if not isinstance(settings, dict):
        raise UsageError(f"{path}: expected a mapping of flag names to values, got a {type(settings).__name__}")
    flags = []
    for key, value in settings.items():
        if isinstance(value, (dict, list)):
            raise UsageError(f"{path}: {key} must be a single value, got {quoted(value)}")
        if value is not None:  # null: the default
            flags.append(f"--{key}={value}")  # one token, so that a negative number is read as the value, not a flag
    try:
        unknown = parser.parse_known_args(flags)[1]
    except UsageError as error:
        raise UsageError(f"{path}: {error}") from error
    if unknown:
        keys = ", ".join(token.split("=")[0][2:] for token in unknown if token.startswith("--"))
        raise UsageError(f"{path}: unknown key(s) {keys}; its keys are the flags of {PROG}")
    return flags


def parse_args(argv: list | None = None) -> tuple[ModelArguments, DataArguments, FiberTrainingArguments]:
    """The arguments: the command line over --config over the defaults, and with no model and no dataset over
    training/configs/sample_demo.yaml (the main job). A bad flag, value or config file is a `UsageError`."""
    parser = ArgumentParser()
    argv = [str(arg) for arg in (sys.argv[1:] if argv is None else argv)]
    given = parser.parse_known_args(argv)[0].config
    path = config_path(given) if given else None
    flags = config_flags(parser, path) if path else []
    layered = parser.parse_known_args(flags + argv)[0]
    if not (layered.model_name_or_path or layered.dataset_name) and path != SAMPLE_DEMO_CONFIG:
        flags = config_flags(parser, SAMPLE_DEMO_CONFIG) + flags
    try:  # ValueError: a dataclass's own check, or flags the parser does not know
        return parser.parse_args_into_dataclasses(flags + argv, look_for_args_file=False)
    except ValueError as error:
        name = str(error).partition(":")[0].lstrip("-")
        source = f"{path}: " if path and any(flag.startswith(f"--{name}=") for flag in flags) else ""
        raise UsageError(source + " ".join(str(error).split())) from error


def training_settings(model_args: ModelArguments, data_args: DataArguments, args: FiberTrainingArguments) -> dict:
    """What shapes a run's training: saved with every checkpoint (`trainer_state.json`) and compared on resume."""
    fixed = ("model_name_or_path", "config_overrides", "fusion", "single_feature")
    return {name: getattr(model_args, name) for name in fixed} | asdict(data_args) | {
        name: str(getattr(args, name)) for name in TRAINING_SETTINGS
    }
