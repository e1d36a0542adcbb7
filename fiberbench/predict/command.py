"""`fiberbench predict`: a model's answers to every blank of a FIBER split, as a file for `fiberbench evaluate`.

Everything that can refuse the run is checked before the dataset or the model's weights are read
where it can be: the flags (`arguments`), the model's config (its kind, the class that loads it,
its safetensors weights: `kinds`); then, before any generation, the dataset split, each clip's
video (opened: `clips`), and an existing output (resumed only when it was written with the same
settings: `record`). Then each process (several under `accelerate launch`) predicts its share of
the clips not done yet, batch by batch (inputs made ahead by data loader workers: `loading`), each
batch's answers picked (`answering`) and written as a part file, and the first process merges all
rows in dataset order (`outputs`).
"""

import argparse
import logging
import os

from fiberbench.cli import default_num_workers
from fiberbench.errors import DataError, alike_on_every_process
from fiberbench.models import inference_dtype, load_config, locate_model, model_files
from fiberbench.predictions import KEY_FIELDS

from .answering import answer_fields, noun_phrase_pipeline, read_replies, reader_pipeline
from .arguments import add_arguments, check_flags
from .clips import clip_keys, find_videos, load_split
from .kinds import PREDICTORS, check_max_new_tokens, choose_kind, make_predictor
from .outputs import SKIPPED, PredictionsFile
from .record import Run, answered_by_the_record, describe_run, request_of, run_inputs
from .settings import PredictSettings

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
        check_flags(settings)
        files = model_files(settings.model_name_or_path)  # hashed once: a large model's files take a while
        request = request_of(settings, files)
        if answered_by_the_record(settings, files, request):
            return 0
        prepared, predictions, inputs, accelerator = prepare_run(settings, files, request)

    def load_model() -> None:
        # Loaded before anything is written: weights that do not match the config are refused with nothing written.
        prepared.predictor.load_model(accelerator.device, prepared.dtype)

    # Locked by the main process until the rows are merged.
    with predictions.open(inputs, accelerator, under_the_lock=load_model):
        predict_and_merge(prepared, predictions, accelerator)
    return 0


def prepare_run(settings: PredictSettings, files: dict[str, str] | None, request: dict | None) -> tuple:
    """Every check that could refuse the run, then what it works on: the `Run`, its `PredictionsFile`, its inputs and
    the Accelerator."""
    source = locate_model(settings.model_name_or_path, settings.revision, settings.trust_remote_code)
    config = load_config(source)
    kind = choose_kind(settings, config)
    check_max_new_tokens(settings, config)
    settings = settings.for_kind(PREDICTORS[kind].prompted)
    inputs = run_inputs(settings)
    # Before anything is loaded: an output that is not this command's to write (its settings are compared later).
    PredictionsFile(settings.output_file, {}, overwrite=settings.overwrite_output_file).output.check(
        inputs, resume=True
    )
    predictor = make_predictor(settings, kind, config, source)
    split = load_split(settings.dataset_name, settings.split, settings.max_predict_samples, predictor.dataset_config)
    keys = clip_keys(split, described_split(settings))
    if not keys:
        raise DataError(f"{described_split(settings)}: has no clips")
    videos, frame_counts = None, None
    if predictor.reads_video:
        videos, frame_counts = find_videos(settings.video_dir, keys, predictor.sampling, settings.skip_missing_videos)
    if predictor.prompted:
        predictor.render_texts(list(split["masked_caption"]), frame_counts)

    nlp = noun_phrase_pipeline(settings, predictor.num_beams)
    reader_nlp = reader_pipeline(settings, predictor.prompted)
    # Imported here, not first: a mistyped path or flag above is answered before it takes seconds to load.
    from accelerate import Accelerator

    accelerator = Accelerator()  # under `accelerate launch`, its processes (with ACCELERATE_USE_CPU=1, on CPU)
    dtype = inference_dtype(accelerator.device)
    prepared = Run(
        settings=settings,
        source=source,
        config=config,
        predictor=predictor,
        split=split,
        keys=keys,
        videos=videos,
        nlp=nlp,
        reader_nlp=reader_nlp,
        dtype=dtype,
        model_files=files,
    )
    predictions = PredictionsFile(
        settings.output_file, describe_run(prepared), overwrite=settings.overwrite_output_file, request=request
    )
    return prepared, predictions, inputs, accelerator


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

    The batches' inputs are made ahead by data loader workers (`loading`) while the model generates.
    """
    from tqdm.auto import tqdm

    from .loading import make_loader

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
                replies = predictor.replies(batch.inputs) if present else []
                candidates = read_replies(replies, masked_captions, prepared.reader_nlp)
                answered = answer_fields(masked_captions, candidates, prepared.nlp, replies)
            else:
                candidates = predictor.candidates(batch.inputs) if present else []
                answered = answer_fields(masked_captions, candidates, prepared.nlp)
            predicted = dict(zip(present, answered))
            skipped = {"prediction": "", "candidates": [], SKIPPED: True} | ({"raw": []} if prompted else {})
            records = [dict(zip(KEY_FIELDS, prepared.keys[index])) | predicted.get(index, skipped) for index in indices]
            predictions.append(accelerator.process_index, records)
            progress.update(len(indices))
