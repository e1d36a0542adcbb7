"""`fiberbench predict`: a model's answers to every blank of a FIBER split, as a predictions file `evaluate` scores.

Everything that can refuse the run is checked before anything is written: the flags, the model's config, the split,
every clip's video, the output. The settings the predictions depend on are recorded beside the file (`fiberbench.
outputs`): a rerun with the same settings appends the clips not written yet; other settings are refused unless
--overwrite_output_file. Under `accelerate launch` each process predicts its share of every step and the main process
appends the rows; the finished file holds them in dataset order, as one process writes it. `--reread`: the replies
kept in a predictions file read again, without the model. With --video_input none the model runs blind (a control);
a clip skipped for a missing video is a row marked `"missing": true`, and the record gives the fingerprint of the clips
answered (`fiberbench clips` gives that of the clips a folder holds)."""

import argparse
import contextlib
import copy
import json
import logging
import os
import sys

import torch
from accelerate import Accelerator
from accelerate.utils import gather_object
from tqdm.auto import tqdm

from fiberbench import __version__
from fiberbench.cli import default_num_workers
from fiberbench.data.loading import dataset_location, split_fingerprint
from fiberbench.data.provenance import is_synthetic
from fiberbench.errors import DataError, FiberbenchError, UsageError, alike_on_every_process
from fiberbench.model_config import inference_dtype, load_config
from fiberbench.outputs import (COMPLETE, check_output, finish_output, output_lock, read_record, record_path,
                                start_output, write_jsonl)
from fiberbench.predict.answers import Answerer
from fiberbench.predict.arguments import DEVICE_MAP_STRATEGIES
from fiberbench.predict.clips import clip_keys, load_split
from fiberbench.predict.predictors import KINDS, PROMPTED_KINDS, choose_kind, make_predictor
from fiberbench.predict.prompts import DEFAULT_PROMPT
from fiberbench.records import KEY_FIELDS, clip_id, clips_fingerprint
from fiberbench.videos import Clip, check_clip_videos, find_clip_video

logger = logging.getLogger(__name__)

COMMAND, FLAG = "fiberbench predict", "--output_file"
# The fields of every row and their JSON types (a bool is no int here: `type` is compared, not isinstance).
ROW_FIELDS = {"video_id": str, "video_start_time": int, "video_end_time": int, "prediction": str}
# The recorded settings --reread reads, and their JSON types.
READ_SETTINGS = (("model", "kind", (str,)), ("dataset", "name", (str, type(None))), ("dataset", "config", (str,)),
                 ("dataset", "split", (str,)), ("dataset", "clips", (int,)), ("dataset", "fingerprint", (str,)),
                 ("decoding", "num_beams", (int,)))


def run(args: argparse.Namespace) -> int:
    """`fiberbench predict` with the arguments `fiberbench.predict.arguments.check` returned (the model located)."""
    state = Accelerator()  # under `accelerate launch`, its processes (with ACCELERATE_USE_CPU=1, on CPU)
    with alike_on_every_process():  # every process makes these checks alike: a refusal is said once
        check_device(args)
        if args.reread is not None:
            return reread(args)
        source = args.model_source
        config, model, dataset_name = load_config(source), source.describe(), dataset_location(args.dataset_name)
        kind = choose_kind(args, config)
        if kind in PROMPTED_KINDS and args.prompt is None:
            args = argparse.Namespace(**{**vars(args), "prompt": DEFAULT_PROMPT})
        predictor = make_predictor(kind, args, source, config)
        split = load_split(args.dataset_name, args.split, args.max_predict_samples, predictor.dataset_config)
        keys = clip_keys(split)
        answerer = Answerer.load(predictor.num_beams, predictor.prompted, args.only_noun_phrases,
                                 args.read_noun_phrases, args.spacy_model)
        dtype = inference_dtype(state.device)
        settings = describe_run(args, model, dataset_name, config, predictor, split, answerer, dtype)
        videos = find_videos(args, predictor, split, keys) if predictor.reads_video else None
        inputs = [path for path in (args.model_name_or_path, args.dataset_name, args.video_dir)
                  if path and os.path.exists(path)]
    with contextlib.ExitStack() as held:
        if state.is_main_process:  # the main process writes; a second run into the output is refused, naming it
            held.enter_context(output_lock(args.output_file, FLAG))
        with alike_on_every_process():
            previous = check_output(args.output_file, command=COMMAND, flag=FLAG,
                                    overwrite=args.overwrite_output_file, inputs=inputs, resume=True)
            rows = resumable_rows(args, settings, previous, keys)
        state.wait_for_everyone()  # every process has read the output before the main one writes it
        pending = [index for index, key in enumerate(keys) if key not in rows or missing(rows[key])]
        if not pending and previous is not None and previous.get("state") == COMPLETE:
            logger.info("%s is complete, made with these settings: nothing to do", args.output_file)
            return 0
        if state.is_main_process:
            logger.info("%s: %d of %d clips of %s, split %s already predicted, %d to go%s", args.output_file,
                        len(keys) - len(pending), len(keys), args.dataset_name or "the bundled sample", args.split,
                        len(pending), " (SYNTHETIC data)" if settings["dataset"]["synthetic"] else "")
        with alike_on_every_process():
            if pending:  # before anything is written: weights that do not match the config are refused first
                predictor.load_model(state.device, dtype)
        if state.is_main_process:
            record = start_output(args.output_file, COMMAND, previous, folder=False, resume=bool(rows),
                                  settings=settings)
            write_jsonl(args.output_file, rows.values())  # a killed run's last line may be cut short: the whole ones
        predict_clips(state, args, predictor, answerer, split, keys, videos, pending)
        if state.is_main_process:
            finish(args.output_file, record, keys)
    return 0


def check_device(args) -> None:
    """--device_map naming a device this torch cannot use (a GPU of a CPU-only build, one past the last): refused here,
    before anything loads."""
    if args.device_map not in (None, *DEVICE_MAP_STRATEGIES):
        try:
            torch.empty(0, device=torch.device(args.device_map))
        except (RuntimeError, ValueError, AssertionError) as error:  # torch says "not compiled with CUDA" by assert
            raise UsageError(f"--device_map {args.device_map}: neither a way to spread the model ("
                             f"{', '.join(DEVICE_MAP_STRATEGIES)}) nor a device this torch can use ({error})") from None


def find_videos(args, predictor, split, keys) -> list:
    """Each clip's video, checked to give the frames asked (None: missing, with --skip_missing_videos); then the
    inputs of the clip of fewest frames are made, so that a processor that cannot read them stops the run here."""
    clips = [Clip(f"{key[0]}, {key[1]}-{key[2]} s", find_clip_video(args.video_dir, *key), key) for key in keys]
    spans = check_clip_videos(clips, predictor.sampling, args.video_dir, args.skip_missing_videos,
                              skipping="predict the others (the skipped clips are marked missing)",
                              skipped="skipped, marked missing")
    counts = {index: predictor.sampling.count(span) for index, span in enumerate(spans) if span is not None}
    if counts:
        fewest = min(counts, key=counts.get)
        try:
            predictor.inputs([{"masked_caption": split[fewest]["masked_caption"], "video": clips[fewest].video}])
        except (ValueError, RuntimeError, IndexError) as error:
            if isinstance(error, FiberbenchError):
                raise
            raise UsageError(f"--model_name_or_path {args.model_name_or_path}: its processor cannot read clip "
                             f"{clips[fewest].name} ({counts[fewest]} frames, chosen by "
                             f"{predictor.sampling_chosen_by}): "
                             f"{' '.join(str(error).split())[:300]}") from error
    return [clip.video for clip in clips]


def describe_run(args, model, dataset_name, config, predictor, split, answerer, dtype) -> dict:
    """The settings the predictions depend on, recorded beside them: a rerun resumes only with the same."""
    columns = [*KEY_FIELDS, "masked_caption", *(["video_features"] if predictor.reads_features else [])]
    return {
        "fiberbench_version": __version__,
        "model": {**model, "kind": predictor.kind, "architectures": config.architectures,
                  "dtype": str(dtype).removeprefix("torch.")},
        "dataset": {"name": dataset_name, "config": predictor.dataset_config, "split": args.split,
                    "clips": len(split), "synthetic": is_synthetic(args.dataset_name),
                    "fingerprint": split_fingerprint(split, columns)},
        "prompt": predictor.prompt(split[0]["masked_caption"]),
        "decoding": predictor.decoding() | answerer.decoding,
        "reader": answerer.reader,
        "video_input": predictor.video_input,  # none: a blind control (or a text model)
        "video": predictor.video_settings() if predictor.reads_video else None,
    }


def differences(ours, theirs, where: str = "") -> list[str]:
    """The settings that differ, as "section.field: X here, Y there"."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        first = ("model", "video_input", "video")  # named first in a refusal, in this order
        keys = sorted(ours.keys() | theirs.keys(), key=lambda name: (first.index(name) if name in first else 3, name))
        return [found for key in keys for found in differences(ours.get(key), theirs.get(key), f"{where}{key}.")]
    return [] if ours == theirs else [f"{where[:-1]}: {json.dumps(ours)} here, {json.dumps(theirs)} there"]


def resumable_rows(args, settings: dict, previous: dict | None, keys: list) -> dict:
    """The rows the output holds by clip, when its earlier record (`previous`, None: nothing there) was written with
    these settings; refused (`UsageError`) when it was written with others, unless --overwrite_output_file."""
    if previous is None:
        return {}
    found = differences(settings, previous.get("settings"))
    if found and not args.overwrite_output_file:
        more = f", and {len(found) - 3} more" if len(found) > 3 else ""
        raise UsageError(f"{record_path(args.output_file, folder=False)} holds predictions made with other settings "
                         f"({'; '.join(found[:3])}{more}); pass --overwrite_output_file to replace it, or another "
                         "--output_file")
    return {} if found else read_rows(args.output_file, keys)


def read_rows(path, keys: list) -> dict:
    """The rows of a predictions file by clip (a later row replacing a skipped one), each checked: a `DataError` names
    the line and the field; a last line cut short by a kill is left out."""
    rows, known = {}, set(keys)
    lines = path.read_bytes().split(b"\n") if path.exists() else []
    for number, line in enumerate(lines[:-1], start=1):  # the last is empty, or a line cut short
        where = f"{path}: line {number}"
        try:
            row = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise DataError(f"{where}: not valid JSON ({error})") from error
        if not isinstance(row, dict):
            raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
        for field, kind in ROW_FIELDS.items():
            if type(row.get(field)) is not kind:
                got = f"must be {'a string' if kind is str else 'an integer'}, got {json.dumps(row.get(field))[:60]}"
                raise DataError(f"{where}: field '{field}' {got if field in row else 'is missing'}")
        for field, values in ((field, row.get(field, [])) for field in ("candidates", "raw")):
            if not isinstance(values, list) or any(type(value) is not str for value in values):
                raise DataError(f"{where}: field '{field}' must be a list of strings, got {json.dumps(values)[:60]}")
        if type(row.get("missing", False)) is not bool:
            raise DataError(f"{where}: field 'missing' must be true or false, got {json.dumps(row['missing'])[:60]}")
        key = tuple(row[field] for field in KEY_FIELDS)
        if key not in known:
            raise DataError(f"{where}: clip {key} is not one of the {len(known)} clips of the split predicted")
        if key not in rows or missing(rows[key]):
            rows[key] = row
    return rows


def missing(row: dict) -> bool:
    return row.get("missing") is True  # a clip skipped for a missing video (--skip_missing_videos): not answered


class Batches:
    """Batch i of this process's clips, made ready for the model by `predictor.inputs`: a map-style dataset, which a
    `DataLoader`'s workers make while the model generates. A clip that fails to decode comes back as its one line (a
    worker's exception would come wrapped in its traceback)."""

    def __init__(self, predictor, batches: list[list[int]], split, videos: list | None):
        self.predictor, self.batches, self.videos = predictor, batches, videos
        self.captions = split["masked_caption"]
        self.features = split.with_format("numpy") if predictor.reads_features else None  # read a batch at a time

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, number: int) -> tuple:
        """(the rows' indices; those put to the model, all but a clip without its video; their inputs; an error)."""
        indices = self.batches[number]
        present = [index for index in indices if self.videos is None or self.videos[index] is not None]
        rows = [{"masked_caption": self.captions[index]} | ({"video": self.videos[index]} if self.videos else {})
                for index in present]
        if self.features is not None and present:
            for row, features in zip(rows, self.features[present]["video_features"]):
                row["video_features"] = features
        try:
            return indices, present, self.predictor.inputs(rows) if rows else None, None
        except DataError as error:
            return indices, present, None, str(error)


def predict_clips(state, args, predictor, answerer, split, keys, videos, pending) -> None:
    """Predict the `pending` clips (row indices) in steps of a batch per process; the main process appends each step's
    rows to the output as they come, whatever the order (`finish` puts them in dataset order)."""
    size, mine = args.per_device_eval_batch_size, state.process_index * args.per_device_eval_batch_size
    step = size * state.num_processes
    batches = [pending[start + mine : start + mine + size] for start in range(0, len(pending), step)]
    here = int(os.environ.get("LOCAL_WORLD_SIZE", state.num_processes))  # processes on this machine
    workers = args.dataloader_num_workers
    workers = min(len(batches), default_num_workers(here) if workers is None else workers)
    loader = torch.utils.data.DataLoader(Batches(predictor, batches, split, videos), batch_size=None,
                                         num_workers=workers, pin_memory=state.device.type == "cuda",
                                         prefetch_factor=4 if workers else None)  # batches ahead, each
    logger.info("Process %d of %d: %d clips to predict, the inputs made %s", state.process_index + 1,
                state.num_processes, sum(map(len, batches)),
                f"by {workers} data loader workers" if workers else "in this process")
    captions = split["masked_caption"]
    no_video = {"prediction": "", **({"candidates": []} if answerer.num_beams > 1 else {}), "raw": [], "missing": True}
    terminal, done, tenth = sys.stderr.isatty(), 0, max(1, len(pending) // 10)
    with contextlib.ExitStack() as stack:
        output = stack.enter_context(args.output_file.open("a", encoding="utf-8")) if state.is_main_process else None
        bar = stack.enter_context(tqdm(total=len(pending), unit="clip", desc="Predicting",
                                       disable=not (terminal and state.is_main_process)))
        for indices, present, inputs, error in loader:
            if error is not None:
                raise DataError(error)
            beams = predictor.generate(inputs) if present else []
            answered = dict(zip(present, answerer.fields([captions[index] for index in present], beams)))
            rows = [dict(zip(KEY_FIELDS, keys[index])) | answered.get(index, no_video) for index in indices]
            rows = gather_object(rows) if state.num_processes > 1 else rows
            if output is not None:
                output.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
                output.flush()
                if not terminal and (done + len(rows)) // tenth > done // tenth:  # a few log lines, not a bar
                    logger.info("Predicted %d of %d clips", done + len(rows), len(pending))
                done += len(rows)
                bar.update(len(rows))


def finish(path, record: dict, keys: list) -> None:
    """The rows in dataset order, one per clip (atomically), and the record `complete` with their `outcome`."""
    rows = read_rows(path, keys)
    if absent := [key for key in keys if key not in rows]:
        raise RuntimeError(f"{len(absent)} clips have no prediction after the run, the first {absent[0]}")
    output = outcome(keys, rows)
    write_jsonl(path, (rows[key] for key in keys))
    finish_output(path, record, output=output)
    logger.info("Wrote %d predictions to %s (settings in %s)%s", len(keys), path, record_path(path, folder=False).name,
                f"; {len(output['missing_clips'])} clips missing (no video), marked so" if output["missing_clips"] else "")


def outcome(keys: list, rows: dict) -> dict:
    """What the record says of a finished file: its rows, the clips missing, and the fingerprint of those answered
    (`fiberbench clips` gives the same for a folder holding their videos)."""
    skipped = [clip_id(*key) for key in keys if missing(rows[key])]
    answered = [clip_id(*key) for key in keys if not missing(rows[key])]
    return {"rows": len(keys), "answered": len(answered), "missing_clips": skipped,
            "clips_fingerprint": clips_fingerprint(answered)}


def reread(args) -> int:
    """Read the replies kept in `args.reread` again into --output_file with the reader settings given, without the
    model: the rows and metadata `fiberbench predict` writes with those settings. The masked captions come from the
    dataset split the metadata names, which must hold the same clips and captions (its fingerprint)."""
    source, metadata = args.reread, record_path(args.reread, folder=False)
    record = read_record(source, folder=False)
    if record is None or record["written_by"] != COMMAND or record.get("state") != COMPLETE:
        raise DataError(f"--reread {source}: no {metadata.name} beside it: not a finished fiberbench predict output")
    settings = copy.deepcopy(record.get("settings")) or {}
    for section, field, kinds in READ_SETTINGS:
        values = settings.get(section) if isinstance(settings.get(section), dict) else {}
        if type(values.get(field, ...)) not in kinds:
            raise DataError(f"{metadata}: field 'settings.{section}.{field}' is missing or of another type")
    if settings["model"]["kind"] not in PROMPTED_KINDS:
        made_by = KINDS[settings["model"]["kind"]][0] if settings["model"]["kind"] in KINDS else "another kind of model"
        raise UsageError(f"--reread {source}: its predictions were made by {made_by}, which keeps no replies (only "
                         "causal and video-language models reply in words)")
    dataset = settings["dataset"]
    split = load_split(dataset["name"], dataset["split"], dataset["clips"], dataset["config"])
    keys = clip_keys(split, f"{source}'s dataset split")
    if split_fingerprint(split, [*KEY_FIELDS, "masked_caption"]) != dataset["fingerprint"]:
        raise DataError(f"{source}: the masked captions of {dataset['name'] or 'the bundled sample'}, split "
                        f"{dataset['split']}, changed since the predictions were made (fingerprint "
                        f"{dataset['fingerprint'][:19]}... in {metadata.name}): the replies answer other blanks; "
                        "predict again")
    rows = read_rows(source, keys)
    if unread := [key for key in keys if not (rows.get(key, {}).get("raw") or missing(rows.get(key, {})))]:
        raise DataError(f"{source}: clip {unread[0]}: no row with field 'raw' (the model's replies) to read again")
    answerer = Answerer.load(settings["decoding"]["num_beams"], True, args.only_noun_phrases, args.read_noun_phrases,
                             args.spacy_model)
    present, captions = [key for key in keys if not missing(rows[key])], dict(zip(keys, split["masked_caption"]))
    replies = [rows[key]["raw"] for key in present]
    answered = dict(zip(present, answerer.fields([captions[key] for key in present], replies)))
    settings["decoding"] |= answerer.decoding
    settings["reader"] = answerer.reader
    read_again = {key: rows[key] | answered.get(key, {}) for key in keys}
    summary = outcome(keys, read_again)
    with output_lock(args.output_file, FLAG):
        previous = check_output(args.output_file, command=COMMAND, flag=FLAG, overwrite=args.overwrite_output_file,
                                inputs=[source, metadata])
        output = start_output(args.output_file, COMMAND, previous, folder=False, settings=settings)
        write_jsonl(args.output_file, read_again.values())
        finish_output(args.output_file, output, output=summary)
    changed = sum(answered[key]["prediction"] != rows[key]["prediction"] for key in present)
    logger.info("Read the replies of %s again into %s: %d of %d answers changed", source, args.output_file, changed,
                len(keys))
    return 0
