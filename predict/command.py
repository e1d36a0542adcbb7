"""`fiberbench predict`: a model's answers to every blank of a FIBER split, as a file for `fiberbench evaluate`.

Everything that can refuse the run is checked before the dataset or the model's weights are read
where it can be: the flags (`settings`), the model's config (its kind, the class that loads it,
its safetensors weights: `kinds`); then, before any generation, the dataset split (`clips`), what
the model's kind reads beyond its rows (each clip's video, opened; every prompt, rendered: the
predictor's `prepare_clips`), and an existing output (resumed only when it was written with the
same settings: `describe_run`). Then each process (several under `accelerate launch`) predicts its
share of the clips not done yet, batch by batch (inputs made ahead by data loader workers:
`clips`), each batch's answers picked (`fiberbench.predict.answers`) and written as a part file, and the
first process merges all rows in dataset order (`outputs`).

`fiberbench predict --reread PREDICTIONS_FILE` is the command's other flow (`reread`): a file's
kept replies read again, without the model.
"""

import argparse
import copy
import logging
import os
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from fiberbench.predict.answers import Answerer
from fiberbench.cli import default_num_workers
from fiberbench.collector import collector_held_off
from fiberbench.errors import DataError, UsageError, alike_on_every_process
from fiberbench.models import inference_dtype, load_config, locate_model, model_commit
from fiberbench.records import KEY_FIELDS

from fiberbench.predict.arguments import add_arguments, parse_settings
from fiberbench.predict.clips import clip_keys, dataset_fingerprint, load_split, make_loader
from fiberbench.predict.kinds import KIND_NAMES, KINDS, PROMPTED_KINDS, check_max_new_tokens, choose_kind, make_predictor
from fiberbench.predict.outputs import SKIPPED, PredictionsFile, check_settings_fields, metadata_path
from fiberbench.predict.settings import PredictSettings, Request, request_of

if TYPE_CHECKING:
    import datasets
    import torch
    from transformers import PretrainedConfig

    from fiberbench.records import ClipKey
    from fiberbench.models import ModelSource
    from fiberbench.videos import ClipVideo

    from fiberbench.predict.predictors import Predictor

__all__ = ["add_arguments", "run"]

logger = logging.getLogger(__name__)


def run(args: argparse.Namespace) -> int:
    """`fiberbench predict` with the parsed command line `args` (read once, as `PredictSettings`)."""
    settings = PredictSettings.from_args(args)
    if settings.reread is not None:
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
        with collector_held_off():  # the libraries, the dataset, the pipelines and processors
            prepared, predictions, accelerator = prepare_run(settings, request, predictions)

    def load_model() -> None:
        # Loaded before anything is written: weights that do not match the config are refused with nothing written.
        with collector_held_off():
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
        "video": predictor.video_settings(),
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
    videos = predictor.prepare_clips(split, keys)  # what its kind reads beyond the rows, checked; prompts rendered
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


# --reread, the command's other flow: a predictions file's kept replies read again, without the model.

# The flags --reread reads; every other one belongs to generation, which --reread does not do.
REREAD_FLAGS = (
    "reread",
    "output_file",
    "overwrite_output_file",
    "read_noun_phrases",
    "only_noun_phrases",
    "spacy_model",
)
# The recorded settings --reread reads: (section, field) -> the JSON types it may have.
READ_SETTINGS = {
    ("model", "kind"): (str,),
    ("dataset", "name"): (str, type(None)),
    ("dataset", "config"): (str,),
    ("dataset", "split"): (str,),
    ("dataset", "clips"): (int,),
    ("dataset", "fingerprint"): (str,),
    ("decoding", "num_beams"): (int,),
}


def check_reread_flags(settings: PredictSettings) -> None:
    """Refuse a flag that --reread would ignore (model, data, prompt, generation): a UsageError naming it."""
    defaults = parse_settings([])
    names = [field.name for field in fields(PredictSettings) if field.name not in REREAD_FLAGS]
    given = [name for name in names if getattr(settings, name) != getattr(defaults, name)]
    if given:
        raise UsageError(
            f"--{given[0]} does not apply to --reread, which reads the replies kept in {settings.reread} again with "
            "the model, data and prompt recorded in its metadata"
        )


def reread(settings: PredictSettings) -> int:
    """Read the replies of `settings.reread` again into `settings.output_file`, without the model.

    A causal or video-language model's predictions keep its replies (`raw`, one per beam). Reading
    them again with other reader settings (`--read_noun_phrases` or `--no_read_noun_phrases`,
    `--spacy_model`) or another beam choice (`--only_noun_phrases`) gives the rows and metadata that
    `fiberbench predict` with those settings writes, because it is the same code: `Answerer`. The
    masked captions come from the dataset split named in the file's metadata, which must still hold
    the same clips and masked captions: its fingerprint must equal the one recorded, as for a
    resumed run. Metadata that is not in predict's shape is one line naming the field.
    """
    check_reread_flags(settings)
    source = settings.reread
    if not source.is_file():
        raise DataError(f"--reread {source}: no such file")
    if not metadata_path(source).is_file():
        raise DataError(
            f"--reread {source}: no {metadata_path(source).name} beside it: not a finished fiberbench predict output"
        )
    inputs = [source, metadata_path(source)]
    output = PredictionsFile(settings.output_file, {}, overwrite=settings.overwrite_output_file)
    output.check_ours(inputs)
    recorded, rows = PredictionsFile(source, settings={}).read_finished()
    check_settings_fields(recorded, READ_SETTINGS, metadata_path(source))
    kind = recorded["model"]["kind"]
    if kind not in PROMPTED_KINDS:
        made_by = KIND_NAMES.get(kind, f"a model of kind {kind!r}")
        raise UsageError(
            f"--reread {source}: its predictions were made by {made_by}, which keeps no replies (only causal and "
            "video-language models reply in words)"
        )
    for row, where in rows:
        if "raw" not in row:
            raise DataError(f"{where}: field 'raw' is missing: the model's replies were not kept to be read again")
        if not row["raw"] and not row.get(SKIPPED):
            raise DataError(f"{where}: field 'raw' is empty, but the clip was not skipped for a missing video")

    dataset = recorded["dataset"]
    split = load_split(dataset["name"], dataset["split"], dataset["clips"], dataset["config"])
    keys = [tuple(row[field] for field in KEY_FIELDS) for row, _ in rows]
    expected = clip_keys(split, f"{source}'s dataset split")
    for (row, where), key, expected_key in zip(rows, keys, expected):
        if key != expected_key:
            raise DataError(
                f"{where}: clip {key} is not the clip {expected_key} of the dataset at that row: the dataset in the "
                "metadata changed since the predictions were made"
            )
    if len(keys) != len(expected):
        raise DataError(f"{source}: {len(keys)} rows for the {len(expected)} clips its metadata names")
    fingerprint, found = dataset["fingerprint"], dataset_fingerprint(split, reads_features=False)
    if found != fingerprint:
        raise DataError(
            f"{source}: the masked captions of {dataset['name'] or 'the bundled sample'}, split {dataset['split']}, "
            f"changed since the predictions were made (fingerprint {found[:19]}... now, {fingerprint[:19]}... in "
            f"{metadata_path(source).name}): the replies answer other blanks; predict again"
        )

    num_beams = recorded["decoding"]["num_beams"]
    answerer = Answerer.load(
        num_beams,
        prompted=True,
        only_noun_phrases=settings.only_noun_phrases,
        read_noun_phrases=settings.read_noun_phrases,
        spacy_model=settings.spacy_model,
    )
    # Clips skipped for a missing video have no reply: they keep their empty answer.
    present = [index for index, (row, _) in enumerate(rows) if not row.get(SKIPPED)]
    all_captions = split["masked_caption"]
    masked_captions = [all_captions[index] for index in present]
    replies = [rows[index][0]["raw"] for index in present]
    answered = dict(zip(present, answerer.fields(masked_captions, replies)))
    records = [row | answered.get(index, {}) for index, (row, _) in enumerate(rows)]
    recorded = copy.deepcopy(recorded)
    recorded["decoding"] |= answerer.decoding
    recorded["reader"] = answerer.reader
    predictions = output.with_settings(recorded)
    with predictions.open(inputs):
        predictions.append(0, records)
        predictions.merge(keys, num_beams)
    changed = sum(record["prediction"] != row["prediction"] for record, (row, _) in zip(records, rows))
    logger.info(
        "Read the replies of %s again into %s: %d of %d answers changed",
        source,
        settings.output_file,
        changed,
        len(rows),
    )
    return 0
