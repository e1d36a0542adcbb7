"""What a run of `fiberbench predict` records beside its predictions, and what an earlier output is compared with.

A run's settings (`describe_run`: the model and its fingerprint, the dataset split and its
fingerprint, the prompt, decoding, reader and video settings) go to the predictions' metadata; a
rerun resumes only with the same. Before anything is loaded, the flags are read once into a
`Request`: the settings that they decide alone (`Request.known`), compared with an earlier
output's, and what was asked for (`Request.asked`: flags, and the local model's and dataset's
files), with which a complete output is said to be done.
"""

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fiberbench.models import local_or_hub, model_commit, model_files

from .clips import dataset_fingerprint

if TYPE_CHECKING:
    import datasets
    import torch
    from transformers import PretrainedConfig

    from fiberbench.data.fiber.validation import ClipKey
    from fiberbench.models import ModelSource
    from fiberbench.videos import ClipVideo

    from .answering import Answerer
    from .predictors import Predictor
    from .settings import PredictSettings


@dataclass(frozen=True)
class Run:
    """What a run works on, once every check that could refuse it has passed: what `describe_run` records
    and `command.predict_shard` reads."""

    settings: "PredictSettings"  # its kind's (`PredictSettings.for_kind`)
    source: "ModelSource"  # where the model is, and how from_pretrained reaches it
    config: "PretrainedConfig"
    predictor: "Predictor"  # of the model's kind (`predictor.kind`)
    split: "datasets.Dataset"
    keys: "list[ClipKey]"  # each row's clip, in dataset order
    videos: "list[ClipVideo | None] | None"  # video-language models: each row's video (None: missing, skipped)
    answerer: "Answerer"  # what picks each clip's answer
    dtype: "torch.dtype"
    request: "Request"  # what the flags asked for


def describe_run(prepared: Run) -> dict:
    """The settings the predictions depend on, recorded beside them: a rerun resumes only with the same."""
    import fiberbench
    from fiberbench.data.provenance import is_synthetic

    settings, predictor, request = (prepared.settings, prepared.predictor, prepared.request)
    return {
        "fiberbench_version": fiberbench.__version__,
        "model": {
            "name_or_path": request.model_name,
            "revision": settings.revision,
            "commit": model_commit(prepared.source),
            "kind": predictor.kind,
            "architectures": prepared.config.architectures,
            "dtype": str(prepared.dtype).removeprefix("torch."),
            # A local folder's files (a Hub model's are its commit's): re-saved weights are other settings.
            "files": request.model_files,
        },
        "dataset": {
            "name": request.dataset_name,
            "config": predictor.dataset_config,
            "split": settings.split,
            "clips": len(prepared.split),
            "synthetic": is_synthetic(settings.dataset_name),
            "fingerprint": dataset_fingerprint(prepared.split, predictor.reads_features),
        },
        "prompt": predictor.prompt(prepared.split[0]["masked_caption"]),
        "decoding": predictor.decoding() | prepared.answerer.decoding,
        "reader": prepared.answerer.reader,
        "video": predictor.video_settings() if predictor.reads_video else None,
    }


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


def request_of(settings: "PredictSettings") -> Request:
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
