"""FIBER's lmms-eval tasks: each clip's video, the prompt, the answer's scores; the `_blind` tasks send no video.

lmms-eval imports this file by its path (`--include_path`); it imports the installed `fiberbench`:
the record checks of the dataset builder, the video file naming and checks of `fiberbench predict`,
its default prompt and its answer reader (`fiberbench.predict.replies.read_answer`), and the
metric's plain functions, so a score here is the score `fiberbench evaluate` gives the same answers.

The reader's noun-phrase step needs an English spaCy pipeline (the `video` extra installs one);
without one the task refuses before any generation, unless FIBER_READ_NOUN_PHRASES=0 asks for the
reading without the step (lmms-eval tasks take no flags). Every logged sample records the reading
(`reader`), which `fiberbench evaluate` shows.

A doc whose clip has no video is refused before any generation, unless FIBER_SKIP_MISSING_VIDEOS=1 (predict's
--skip_missing_videos): then it is kept, sent without a video, and logged `"missing": true` with an empty answer and no
scores, so the scores stand on the clips answered, `answered` says on how many, and the samples hold every doc.
"""

import functools
import logging
import os
from pathlib import Path

from fiberbench.errors import DataError, UsageError
from fiberbench.metric import (annotators_from_example, exact_match, f1, f1_release, references_from_example,
                               vqa_accuracy)
from fiberbench.records import KEY_FIELDS, clip_id, validate_record
from fiberbench.predict.prompts import DEFAULT_PROMPT, check_template
from fiberbench.predict.replies import load_reader_pipeline, read_answer, reader_settings
from fiberbench.videos import ClipVideo, FrameSampling, check_video, expected_names, find_clip_video

logger = logging.getLogger(__name__)

VIDEO_DIR_ENV = "FIBER_VIDEO_DIR"
SKIP_MISSING_ENV = "FIBER_SKIP_MISSING_VIDEOS"  # 1: a clip without a video is logged as missing, not refused
# 0: read the replies without the noun-phrase step (predict's --no_read_noun_phrases); 1, the default: with it.
READ_NOUN_PHRASES_ENV = "FIBER_READ_NOUN_PHRASES"
# What `validate_record` reads of a doc (the other columns, such as `category`, are the builder's own).
RECORD_FIELDS = (*KEY_FIELDS, "caption", "masked_caption", "label", "additional_answers")


def video_dir() -> Path:
    """The folder of the clips' videos, from the environment variable FIBER_VIDEO_DIR."""
    folder = os.environ.get(VIDEO_DIR_ENV)
    if not folder:
        raise UsageError(f"the FIBER task reads the clips' videos from the folder named by {VIDEO_DIR_ENV}: set it")
    if not Path(folder).is_dir():
        raise DataError(f"{VIDEO_DIR_ENV}={folder}: no such folder")
    return Path(folder)


def clip_video(doc: dict, folder: Path) -> ClipVideo | None:
    """The .mp4 file of the clip alone (lmms-eval's models read whole files, so a whole video cannot stand for a clip;
    not every backend reads other formats); None when there is none, with FIBER_SKIP_MISSING_VIDEOS=1."""
    video_id, start, end = (doc[field] for field in KEY_FIELDS)
    video = find_clip_video(folder, video_id, start, end)
    if video is None and os.environ.get(SKIP_MISSING_ENV) == "1":
        return None
    if video is None:
        raise DataError(
            f"{VIDEO_DIR_ENV}={folder}: no video for clip {video_id} ({start}-{end} s): looked for "
            f"{expected_names(video_id, start, end)} (or set {SKIP_MISSING_ENV}=1 to log the clips without one as "
            "missing)"
        )
    if video.start is not None:
        raise DataError(
            f"{video.path}: the whole video of clip {video_id} ({start}-{end} s), but lmms-eval's models read whole "
            f"files: the clip needs a file of its own, {clip_id(video_id, start, end)}.mp4"
        )
    if video.path.suffix != ".mp4":
        # lmms-eval 0.7.3's chat tasks take a .webm for audio, and its qwen2_vl backend skips what is not .mp4,
        # .avi or .mov (logging an error, then answering without the video).
        raise DataError(
            f"{video.path}: lmms-eval's models read clips from .mp4 files; convert it to {video.path.stem}.mp4"
        )
    return video


def process_docs(dataset, blind: bool = False):
    """The split as it is, once everything that could fail after generation has been checked, before any: the answer
    reader's pipeline loads; every doc is a FIBER record (`validate_record`, the builder's check: a plain video id,
    whole-second times, one blank in the caption); unless `blind`, every clip's video is found (or missing, with
    FIBER_SKIP_MISSING_VIDEOS=1) and opens as a video of at least one frame. A `DataError` (or `UsageError`) names the
    first that fails and counts them."""
    folder = None if blind else video_dir()
    reader_pipeline()
    described = f"the FIBER task's {dataset.split} split" if dataset.split else "the FIBER task's docs"
    invalid = []
    columns = [field for field in RECORD_FIELDS if field in dataset.column_names]
    for index, doc in enumerate(dataset.select_columns(columns)):
        try:
            validate_record(doc, file=described, index=index)
        except DataError as error:
            invalid.append(error)
    if invalid:
        raise DataError(f"{invalid[0]}; {len(invalid)} of {len(dataset)} docs are not FIBER records")
    if blind:
        return dataset
    unusable, missing = [], 0
    for doc in dataset.select_columns(list(KEY_FIELDS)):
        try:
            if (video := clip_video(doc, folder)) is None:
                missing += 1
            else:
                check_video(video, FrameSampling(num_frames=1))
        except DataError as error:
            unusable.append(error)
    if unusable:
        raise DataError(f"{unusable[0]}; {len(unusable)} of {len(dataset)} clips have no usable video")
    if missing:
        logger.warning("%d of %d clips have no video in %s: sent without one, logged as missing", missing,
                       len(dataset), folder)
    return dataset


def process_docs_blind(dataset):
    return process_docs(dataset, blind=True)


def doc_to_visual(doc: dict) -> list[str]:
    video = clip_video(doc, video_dir())
    return [] if video is None else [str(video.path)]


def doc_to_visual_blind(doc: dict) -> list[str]:
    return []


def doc_to_text(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> str:
    """`fiberbench predict`'s prompt (or the YAML's `prompt` template) with the clip's masked caption."""
    template = (lmms_eval_specific_kwargs or {}).get("prompt") or DEFAULT_PROMPT
    try:
        check_template(template)
    except ValueError as error:
        raise ValueError(f"the task's prompt {template!r}: {error}") from None
    return template.format(masked_caption=doc["masked_caption"])


def doc_to_target(doc: dict) -> str:
    return doc["label"]


@functools.cache
def reader_pipeline():
    """The spaCy pipeline of the answer reader's noun-phrase step, loaded once; None with FIBER_READ_NOUN_PHRASES=0.

    Where none can be loaded, a `UsageError` says how to install one or to set FIBER_READ_NOUN_PHRASES=0.
    """
    asked = os.environ.get(READ_NOUN_PHRASES_ENV, "1")
    if asked not in ("0", "1"):
        raise UsageError(
            f"{READ_NOUN_PHRASES_ENV}={asked}: 1 (the default) reads replies with the noun-phrase step, 0 without it"
        )
    if asked == "0":
        return None
    return load_reader_pipeline(opt_out=f"set {READ_NOUN_PHRASES_ENV}=0")


def process_results(doc: dict, results: list, video_input: str = "video") -> dict:
    """The answer in the model's reply, scored against all the clip's answers and against its label alone.

    The metrics (aggregated by their mean) come with the clip's key, the answer, how it was read
    (`reader_settings`) and whether the model saw the video (`video_input`), which lmms-eval logs with
    each sample (--log_samples): the samples file is a predictions file that `fiberbench evaluate`
    reads. A clip without its video is `missing`, with no scores; no reply (`[]`, `[None]`) is an
    empty answer.
    """
    nlp = reader_pipeline()
    clip = {field: doc[field] for field in KEY_FIELDS}
    logged = {**clip, "reader": reader_settings(nlp), "video_input": video_input}
    if video_input == "video" and clip_video(doc, video_dir()) is None:
        return {"answered": 0.0, **logged, "prediction": "", "missing": True}
    if not isinstance(reply := results[0] if results else None, str):  # a backend's failed generation
        logger.warning("clip %s: the model gave no reply (%r): an empty answer", clip_id(*clip.values()), reply)
        reply = ""
    answer = read_answer(reply, doc["masked_caption"], nlp)
    all_answers, label = references_from_example(doc), references_from_example(doc, label_only=True)
    return {
        "exact_match": exact_match(answer, all_answers),
        "f1": f1(answer, all_answers),
        "exact_match_label_only": exact_match(answer, label),
        "f1_label_only": f1(answer, label),
        "vqa_accuracy": vqa_accuracy(answer, annotators_from_example(doc)),
        "f1_release": f1_release(answer, all_answers),
        "answered": 100.0,
        **logged,
        "prediction": answer,
    }


def process_results_blind(doc: dict, results: list) -> dict:
    return process_results(doc, results, video_input="none")
