"""`fiberbench predict`: a model's answers to every blank of a FIBER split, as a file for `fiberbench evaluate`.

Everything that can refuse the run is checked before the dataset or the model's weights are read
where it can be: the flags (`settings`), the model's config (its kind, the class that loads it,
its safetensors weights: `kinds`); then, before any generation, the dataset split, each clip's
video (opened: `clips`), and an existing output (resumed only when it was written with the same
settings: `describe_run`). Then each process (several under `accelerate launch`) predicts its
share of the clips not done yet, batch by batch (inputs made ahead by data loader workers:
`clips`), each batch's answers picked (`fiberbench.answers`) and written as a part file, and the
first process merges all rows in dataset order (`outputs`).
"""

import argparse
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fiberbench.answers import Answerer
from fiberbench.cli import default_num_workers
from fiberbench.errors import DataError, alike_on_every_process
from fiberbench.models import inference_dtype, load_config, locate_model, model_commit
from fiberbench.predictions import KEY_FIELDS

from .arguments import add_arguments
from .clips import clip_keys, dataset_fingerprint, find_videos, load_split, make_loader
from .kinds import KINDS, check_max_new_tokens, choose_kind, make_predictor
from .outputs import SKIPPED, PredictionsFile
from .settings import PredictSettings, Request, request_of

if TYPE_CHECKING:
    import datasets
    import torch
    from transformers import PretrainedConfig

    from fiberbench.data.fiber.validation import ClipKey
    from fiberbench.models import ModelSource
    from fiberbench.videos import ClipVideo

    from .predictors import Predictor

__all__ = ["add_arguments", "run"]

logger = logging.getLogger(__name__)


def run(args: argparse.Namespace) -> int:
    """`fiberbench predict` with the parsed command line `args` (read once, as `PredictSettings`)."""
    settings = PredictSettings.from_args(args)
    if settings.reread is not None:
        from .reread import reread

        return reread(settings)
    # Every process makes these checks alike: a refusal is said once, by the main process.
    with alike_on_every_process():
        settings.check_flags()
        request = request_of(settings)
        # Before anything is loaded: an earlier output of other settings is refused, a complete one of this request
        # is done. The output is this file throughout; its settings are known in full once the model is read.
        predictions = PredictionsFile(
            settings.output_file, request.known, overwrite=settings.overwrite_output_file, request=request.asked
        )
        if predictions.answered_by_the_record(request.inputs):
            logger.info("%s is complete, made with these settings: nothing to do", settings.output_file)
            return 0
        prepared, predictions, accelerator = prepare_run(settings, request, predictions)

    def load_model() -> None:
        # Loaded before anything is written: weights that do not match the config are refused with nothing written.
        prepared.predictor.load_model(accelerator.device, prepared.dtype)

    # Locked by the main process until the rows are merged.
    with predictions.open(request.inputs, accelerator, under_the_lock=load_model):
        predict_and_merge(prepared, predictions, accelerator)
    return 0


@dataclass(frozen=True)
class Run:
    """What a run works on, once every check that could refuse it has passed: what `describe_run` records
    and `command.predict_shard` reads."""

    settings: PredictSettings  # its kind's (`PredictSettings.for_kind`)
    source: "ModelSource"  # where the model is, and how from_pretrained reaches it
    config: "PretrainedConfig"
    predictor: "Predictor"  # of the model's kind (`predictor.kind.name`)
    split: "datasets.Dataset"
    keys: "list[ClipKey]"  # each row's clip, in dataset order
    videos: "list[ClipVideo | None] | None"  # video-language models: each row's video (None: missing, skipped)
    answerer: Answerer  # what picks each clip's answer
    dtype: "torch.dtype"
    request: Request  # what the flags asked for


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
            "kind": predictor.kind.name,
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


def prepare_run(settings: PredictSettings, request: Request, predictions: PredictionsFile) -> tuple:
    """Every check that could refuse the run, then what it works on: the `Run`, its `PredictionsFile` (`predictions`
    with the run's settings) and the Accelerator."""
    source = locate_model(settings.model_name_or_path, settings.revision, settings.trust_remote_code)
    config = load_config(source)
    kind = choose_kind(settings, config)
    check_max_new_tokens(settings, config)
    settings = settings.for_kind(KINDS[kind].predictor.prompted)
    predictor = make_predictor(settings, kind, config, source)
    predictions.check_ours(request.inputs)
    split = load_split(settings.dataset_name, settings.split, settings.max_predict_samples, predictor.dataset_config)
    keys = clip_keys(split, described_split(settings))
    if not keys:
        raise DataError(f"{described_split(settings)}: has no clips")
    videos, frame_counts = None, None
    if predictor.reads_video:
        videos, frame_counts = find_videos(settings.video_dir, keys, predictor.sampling, settings.skip_missing_videos)
    if predictor.prompted:
        predictor.render_texts(list(split["masked_caption"]), frame_counts)
    answerer = Answerer.load(
        predictor.num_beams,
        predictor.prompted,
        only_noun_phrases=settings.only_noun_phrases,
        read_noun_phrases=settings.read_noun_phrases,
        spacy_model=settings.spacy_model,
    )
    # Imported here, not first: a mistyped path or flag above is answered before it takes seconds to load.
    from accelerate import Accelerator

    accelerator = Accelerator()  # under `accelerate launch`, its processes (with ACCELERATE_USE_CPU=1, on CPU)
    dtype = inference_dtype(accelerator.device)
    # Each local is named as the field it fills, in the fields' order.
    prepared = Run(settings, source, config, predictor, split, keys, videos, answerer, dtype, request)
    return prepared, predictions.with_settings(describe_run(prepared)), accelerator


def described_split(settings: PredictSettings) -> str:
    """The dataset split of a run, as messages name it."""
    return f"{settings.dataset_name or 'the bundled sample'}, split {settings.split}"


def predict_and_merge(prepared: Run, predictions, accelerator) -> None:
    """With the output opened (checked, locked, its part files started or resumed): predict the clips not done, merge
    them."""
    settings, keys, predictor = prepared.settings, prepared.keys, prepared.predictor
    done = predictions.done()
    accelerator.wait_for_everyone()  # every process has read the part files before any writes a new one
    pending = [index for index, key in enumerate(keys) if key not in done]
    if accelerator.is_main_process:
        logger.info(
            "%s: %d of %d clips of %s already predicted, %d to go%s",
            settings.output_file,
            len(done & set(keys)),
            len(keys),
            described_split(settings),
            len(pending),
            " (SYNTHETIC data)" if predictions.settings["dataset"]["synthetic"] else "",
        )
    shard = pending[accelerator.process_index :: accelerator.num_processes]
    logger.info(
        "Process %d of %d: %d clips to predict", accelerator.process_index + 1, accelerator.num_processes, len(shard)
    )
    if shard:
        predict_shard(prepared, shard, predictions, accelerator)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        output = predictions.merge(keys, predictor.num_beams)
        skipped = len(output["skipped_missing_videos"])
        logger.info(
            "Wrote %d predictions to %s (settings in %s)%s",
            output["rows"],
            settings.output_file,
            predictions.metadata_path.name,
            f"; {skipped} clips skipped for a missing video" if skipped else "",
        )


def predict_shard(prepared: Run, shard: list[int], predictions, accelerator) -> None:
    """Predict this process's clips (`shard`, row indices) batch by batch, writing each batch's rows as a part file.

    The batches' inputs are made ahead by data loader workers (`clips.make_loader`) while the model generates.
    """
    from tqdm.auto import tqdm

    settings, predictor = prepared.settings, prepared.predictor
    processes_here = int(os.environ.get("LOCAL_WORLD_SIZE", accelerator.num_processes))
    workers = settings.dataloader_num_workers
    if workers is None:
        workers = default_num_workers(processes_here)
    loader = make_loader(
        predictor,
        shard,
        batch_size=settings.per_device_eval_batch_size,
        split=prepared.split,
        videos=prepared.videos,
        num_workers=workers,
        pin_memory=accelerator.device.type == "cuda",
    )
    logger.info(
        "Process %d of %d: the inputs made %s",
        accelerator.process_index + 1,
        accelerator.num_processes,
        f"by {loader.num_workers} data loader workers" if loader.num_workers else "in this process",
    )
    prompted = predictor.prompted
    progress = tqdm(
        total=len(shard),
        unit="clip",
        desc=f"Predicting (process {accelerator.process_index + 1} of {accelerator.num_processes})",
        disable=not accelerator.is_local_main_process,
    )
    with progress:
        for batch in loader:
            if batch.error is not None:  # a clip that failed to decode in a worker: its one line
                raise DataError(batch.error)
            # Clips without a video (--skip_missing_videos) are not put to the model.
            indices, present, masked_captions = batch.indices, batch.present, batch.masked_captions
            if prompted:  # models that reply in words: their replies are read, and kept
                beams = predictor.replies(batch.inputs) if present else []
            else:
                beams = predictor.candidates(batch.inputs) if present else []
            answered = prepared.answerer.fields(masked_captions, beams)
            predicted = dict(zip(present, answered))
            skipped = {"prediction": "", "candidates": [], SKIPPED: True} | ({"raw": []} if prompted else {})
            records = [dict(zip(KEY_FIELDS, prepared.keys[index])) | predicted.get(index, skipped) for index in indices]
            predictions.append(accelerator.process_index, records)
            progress.update(len(indices))
