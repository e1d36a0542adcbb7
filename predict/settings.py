"""The settings of one `fiberbench predict` run: its flags, read once and checked, and what they ask for.

Every part of a run (the checks, the predictors, `--reread`) reads a `PredictSettings`, not the
argparse namespace: its fields are the flags `arguments.add_arguments` defines, by their names, and
nothing else (`arguments.parse_settings` reads them from a list of flags). A value that can be
judged alone was checked as it was parsed (its argparse `type`); the settings check the rest
before anything is loaded (`PredictSettings.check_flags`: the flags together, and against this
machine; the checks that need the model's config are in `kinds`). What a run decides from them
(the default `--prompt` of a kind that reads one) is a new object (`for_kind`), never a change to
this one.

What they ask for, before anything is loaded: a `Request` (`request_of`), the settings that the
flags decide alone (`Request.known`), compared with an earlier output's, and what was asked for
(`Request.asked`: flags, and the local model's and dataset's files), with which a complete output
is said to be done. The settings recorded in full, once the model and the dataset are read, are
`command.describe_run`'s.
"""

import argparse
import os
from dataclasses import dataclass, fields, replace
from pathlib import Path

from fiberbench.errors import DataError, UsageError
from fiberbench.models import local_or_hub, model_files
from fiberbench.predict.prompts import DEFAULT_PROMPT


@dataclass(frozen=True)
class PredictSettings:
    """`fiberbench predict`'s flags, by their names (see `fiberbench predict --help`)."""

    # model
    model_name_or_path: str | None
    revision: str | None
    model_type: str | None
    device_map: str | None
    trust_remote_code: bool
    # data
    dataset_name: str | None
    split: str
    max_predict_samples: int | None
    video_dir: Path | None
    video_input: str | None
    num_frames: int | None
    fps: float | None
    max_frames: int | None
    skip_missing_videos: bool
    # decoding
    prompt: str | None
    num_beams: int | None
    max_new_tokens: int
    only_noun_phrases: bool
    read_noun_phrases: bool | None
    spacy_model: str | None
    per_device_eval_batch_size: int
    dataloader_num_workers: int | None
    # output
    output_file: Path
    overwrite_output_file: bool
    reread: Path | None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "PredictSettings":
        """The settings of a parsed command line (other attributes of `args`, such as the subcommand's, are not
        settings)."""
        return cls(**{field.name: getattr(args, field.name) for field in fields(cls)})

    def for_kind(self, prompted: bool) -> "PredictSettings":
        """The settings a model of a kind runs with: a kind that reads a prompt gets the default one when --prompt is
        not given."""
        if prompted and self.prompt is None:
            return replace(self, prompt=DEFAULT_PROMPT)
        return self

    def check_flags(self) -> None:
        """The flags that their parsing cannot judge, before anything is loaded: one missing, two that exclude each
        other, a device or folder this machine does not have (a UsageError or DataError naming the flag)."""
        if self.model_name_or_path is None:
            raise UsageError(
                "--model_name_or_path is required (or --reread, to read a predictions file's replies again)"
            )
        if self.device_map is not None and int(os.environ.get("WORLD_SIZE", "1")) > 1:
            raise UsageError(
                "--device_map spreads one model over the GPUs in one process; under accelerate launch each process "
                "holds a copy of the model: use one or the other"
            )
        if self.device_map is not None:
            check_device_map(self.device_map)
        if self.num_frames is not None and self.fps is not None:
            raise UsageError("--num_frames and --fps are two ways to choose the frames: give one")
        if self.max_frames is not None and self.fps is None:
            raise UsageError("--max_frames applies to --fps (with --num_frames, the number of frames is fixed)")
        if self.video_dir is not None and self.video_dir.exists() and not self.video_dir.is_dir():
            raise UsageError(f"--video_dir {self.video_dir} is a file; give the folder of the clips' videos")
        if self.video_dir is not None and not self.video_dir.is_dir():
            raise DataError(f"--video_dir {self.video_dir}: no such folder")


# --device_map's ways to spread a model (Accelerate's); any other value names one device.
DEVICE_MAP_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")


def check_device_map(device_map: str) -> None:
    """--device_map: a way to spread the model, or a device this torch can put it on (a GPU of a CPU-only build, or
    one past the last, is refused here rather than failing as the weights load)."""
    if device_map in DEVICE_MAP_STRATEGIES:
        return
    import torch

    try:
        device = torch.device(device_map)
    except (RuntimeError, ValueError):
        raise UsageError(
            f"--device_map {device_map}: neither a way to spread the model ({', '.join(DEVICE_MAP_STRATEGIES)}) nor a "
            "device (cpu, cuda:0, ...)"
        ) from None
    if device.type == "cpu":
        return
    accelerator = torch.accelerator.current_accelerator()
    if accelerator is None or accelerator.type != device.type:
        raise UsageError(
            f"--device_map {device_map}: this torch ({torch.__version__}) has no {device.type} device here (a build "
            "without it, or none visible); leave --device_map out, or give cpu or auto"
        )
    count = torch.accelerator.device_count()
    if device.index is not None and device.index >= count:
        raise UsageError(
            f"--device_map {device_map}: this machine has {count} {device.type} device{'s' * (count != 1)} "
            f"({device.type}:0 to {device.type}:{count - 1})"
        )


# Arguments that change how a run goes, not what it predicts.
NOT_IN_REQUEST = ("output_file", "overwrite_output_file", "per_device_eval_batch_size", "reread")


@dataclass(frozen=True)
class Request:
    """What a run's flags ask for, read once before anything is loaded: what the record compares with an earlier
    output's, and what `describe_run` names the model and the dataset by."""

    model_name: str | None  # --model_name_or_path, as the record names it (`local_or_hub`)
    dataset_name: str | None  # --dataset_name, likewise
    model_files: dict[str, str] | None  # a local model folder's files (`model_files`); None for a Hub model
    inputs: list  # what the output is kept apart from: the local model and dataset folders, and the videos' folder
    known: dict  # the settings (`describe_run`) that the flags decide alone
    # The flags that decide the predictions and the files of the local model and dataset folders (read, not
    # loaded), kept beside the settings; None for a Hub model or dataset, whose files are known only once resolved.
    asked: dict | None


def request_of(settings: PredictSettings) -> Request:
    """The `Request` of a run's `settings`: its local model folder's files are hashed once here (a large model's take
    a while)."""
    import fiberbench
    from fiberbench.data import SAMPLE_DIR
    from fiberbench.files import folder_fingerprint
    from fiberbench.ownership import arguments_of

    names = (settings.model_name_or_path, settings.dataset_name)
    inputs = [*(path for path in names if path and Path(path).exists()), settings.video_dir]
    dataset = SAMPLE_DIR if settings.dataset_name is None else Path(settings.dataset_name).expanduser()
    arguments = {
        name: value for name, value in arguments_of(settings)["arguments"].items() if name not in NOT_IN_REQUEST
    }
    files = model_files(settings.model_name_or_path)
    model_name, dataset_name = local_or_hub(settings.model_name_or_path), local_or_hub(settings.dataset_name)
    known = {
        "fiberbench_version": fiberbench.__version__,
        "model": {"name_or_path": model_name, "revision": settings.revision, "files": files},
        "dataset": {"name": dataset_name, "split": settings.split},
        "decoding": {"max_new_tokens": settings.max_new_tokens}
        | ({"num_beams": settings.num_beams} if settings.num_beams is not None else {}),
    }
    asked = None
    if files is not None and dataset.is_dir():
        asked = {
            "arguments": arguments | {"model_name_or_path": model_name, "dataset_name": dataset_name},
            # The pipeline chosen by default is named by the environment (see --spacy_model).
            "environment": {"FIBERBENCH_SPACY_MODEL": os.environ.get("FIBERBENCH_SPACY_MODEL")},
            "model_files": files,
            "dataset_files": folder_fingerprint(dataset),
        }
    return Request(model_name, dataset_name, files, inputs, known, asked)
