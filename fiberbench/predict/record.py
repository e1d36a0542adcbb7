"""What a run of `fiberbench predict` records beside its predictions, and what an earlier output is compared with.

A run's settings (`describe_run`: the model and its fingerprint, the dataset split and its
fingerprint, the prompt, decoding, reader and video settings) go to the predictions' metadata; a
rerun resumes only with the same. Before anything is loaded, the settings that the flags decide
alone (`known_settings`) are compared with an earlier output's, and a complete output asked for
with the same `request_of` (flags, and the local model's and dataset's files) is said to be done.
"""

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fiberbench.models import local_or_hub, model_commit
from fiberbench.replies import reader_settings

from .answering import noun_phrase_settings
from .clips import dataset_fingerprint
from .outputs import PredictionsFile

if TYPE_CHECKING:
    import datasets
    import torch
    from spacy.language import Language
    from transformers import PretrainedConfig

    from fiberbench.data.fiber.validation import ClipKey
    from fiberbench.models import ModelSource
    from fiberbench.videos import ClipVideo

    from .predictors import Predictor
    from .settings import PredictSettings

logger = logging.getLogger(__name__)


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
    nlp: "Language | None"  # the pipeline that picks the first noun-phrase beam, if any
    reader_nlp: "Language | None"  # the pipeline of the answer reader's noun-phrase step, if any
    dtype: "torch.dtype"
    model_files: dict[str, str] | None  # a local model folder's files (`model_files`); None for a Hub model


def describe_run(prepared: Run) -> dict:
    """The settings the predictions depend on, recorded beside them: a rerun resumes only with the same."""
    import fiberbench
    from fiberbench.data.provenance import is_synthetic

    settings, predictor = prepared.settings, prepared.predictor
    return {
        "fiberbench_version": fiberbench.__version__,
        "model": {
            "name_or_path": local_or_hub(settings.model_name_or_path),
            "revision": settings.revision,
            "commit": model_commit(prepared.source),
            "kind": predictor.kind,
            "architectures": prepared.config.architectures,
            "dtype": str(prepared.dtype).removeprefix("torch."),
            # A local folder's files (a Hub model's are its commit's): re-saved weights are other settings.
            "files": prepared.model_files,
        },
        "dataset": {
            "name": local_or_hub(settings.dataset_name),
            "config": predictor.dataset_config,
            "split": settings.split,
            "clips": len(prepared.split),
            "synthetic": is_synthetic(settings.dataset_name),
            "fingerprint": dataset_fingerprint(prepared.split, predictor.reads_features),
        },
        "prompt": predictor.prompt(prepared.split[0]["masked_caption"]),
        "decoding": predictor.decoding() | noun_phrase_settings(prepared.nlp),
        "reader": reader_settings(prepared.reader_nlp) if predictor.prompted else None,
        "video": predictor.video_settings() if predictor.reads_video else None,
    }


def run_inputs(settings: "PredictSettings") -> list:
    """What the output is kept apart from: the local model and dataset folders, and the videos' folder."""
    names = (settings.model_name_or_path, settings.dataset_name)
    return [*(path for path in names if path and Path(path).exists()), settings.video_dir]


# Arguments that change how a run goes, not what it predicts.
NOT_IN_REQUEST = ("output_file", "overwrite_output_file", "per_device_eval_batch_size", "reread")


def request_of(settings: "PredictSettings", files: dict[str, str] | None) -> dict | None:
    """What a run asks for, as the record keeps it beside the settings: the arguments that decide the predictions
    and the files of the local model (`files`, `model_files`) and dataset folders (read, not loaded). None for a Hub
    model or dataset, whose files are known only once they are resolved."""
    from fiberbench.data import SAMPLE_DIR
    from fiberbench.files import folder_fingerprint
    from fiberbench.ownership import arguments_of

    dataset = SAMPLE_DIR if settings.dataset_name is None else Path(settings.dataset_name).expanduser()
    if files is None or not dataset.is_dir():
        return None
    asked = arguments_of(settings)["arguments"]
    arguments = {name: value for name, value in asked.items() if name not in NOT_IN_REQUEST}
    arguments |= {name: local_or_hub(getattr(settings, name)) for name in ("model_name_or_path", "dataset_name")}
    # The pipeline chosen by default is named by the environment (see --spacy_model).
    environment = {"FIBERBENCH_SPACY_MODEL": os.environ.get("FIBERBENCH_SPACY_MODEL")}
    return {
        "arguments": arguments,
        "environment": environment,
        "model_files": files,
        "dataset_files": folder_fingerprint(dataset),
    }


def known_settings(settings: "PredictSettings", files: dict[str, str] | None) -> dict:
    """The settings (`describe_run`) that the arguments decide alone, known before any model or pipeline is read."""
    import fiberbench

    return {
        "fiberbench_version": fiberbench.__version__,
        "model": {
            "name_or_path": local_or_hub(settings.model_name_or_path),
            "revision": settings.revision,
            "files": files,
        },
        "dataset": {"name": local_or_hub(settings.dataset_name), "split": settings.split},
        "decoding": {"max_new_tokens": settings.max_new_tokens}
        | ({"num_beams": settings.num_beams} if settings.num_beams is not None else {}),
    }


def answered_by_the_record(settings: "PredictSettings", files: dict[str, str] | None, request: dict | None) -> bool:
    """Before anything is loaded: an earlier output's recorded settings that differ from what the arguments decide
    are refused, and a complete output asked for with this `request` is said to be done (True: nothing to do)."""
    predictions = PredictionsFile(
        settings.output_file, known_settings(settings, files), overwrite=settings.overwrite_output_file
    )
    if not predictions.answered_by_the_record(run_inputs(settings), request):
        return False
    logger.info("%s is complete, made with these settings: nothing to do", settings.output_file)
    return True
