"""FIBER's lmms-eval tasks (fiber_test.yaml, fiber_val.yaml): each clip's video, the prompt, the answer's scores.

lmms-eval imports this file by its path (`--include_path`); it imports the installed `fiberbench`:
the record checks of the dataset builder, the video file naming and checks of `fiberbench predict`,
its default prompt and its answer reader (`fiberbench.predict.replies.read_answer`), and the
metric's plain functions, so a score here is the score `fiberbench evaluate` gives the same answers.

The reader's noun-phrase step needs an English spaCy pipeline (the `video` extra installs one);
without one the task refuses before any generation, unless FIBER_READ_NOUN_PHRASES=0 asks for the
reading without the step (lmms-eval tasks take no flags). Every logged sample records the reading
(`reader`), which `fiberbench evaluate` shows.
"""

import functools
import os
from pathlib import Path

from fiberbench.records import clip_id, validate_record
from fiberbench.errors import DataError, UsageError
from fiberbench.metric import exact_match, f1, references_from_example
from fiberbench.records import KEY_FIELDS
from fiberbench.predict.prompts import DEFAULT_PROMPT, check_template
from fiberbench.predict.replies import load_reader_pipeline, read_answer, reader_settings
from fiberbench.videos import ClipVideo, FrameSampling, check_video, expected_names, find_clip_video

VIDEO_DIR_ENV = "FIBER_VIDEO_DIR"
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


def clip_video(doc: dict, folder: Path) -> ClipVideo:
    """The .mp4 file of the clip alone (lmms-eval's models read whole files, so a whole video cannot stand for a clip;
    not every backend reads other formats)."""
    video_id, start, end = (doc[field] for field in KEY_FIELDS)
    video = find_clip_video(folder, video_id, start, end)
    if video is None:
        raise DataError(
            f"{VIDEO_DIR_ENV}={folder}: no video for clip {video_id} ({start}-{end} s): looked for "
            f"{expected_names(video_id, start, end)}"
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


def process_docs(dataset):
    """The split as it is, once everything that could fail after generation has been checked, before any: the answer
    reader's pipeline loads; every doc is a FIBER record (`validate_record`, the builder's check: a plain video id,
    whole-second times, one blank in the caption); every clip's video is found and opens as a video of at least one
    frame. A `DataError` (or `UsageError`) names the first that fails and counts them."""
    folder = video_dir()
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
    unusable = []
    for doc in dataset.select_columns(list(KEY_FIELDS)):
        try:
            check_video(clip_video(doc, folder), FrameSampling(num_frames=1))
        except DataError as error:
            unusable.append(error)
    if unusable:
        raise DataError(f"{unusable[0]}; {len(unusable)} of {len(dataset)} clips have no usable video")
    return dataset


def doc_to_visual(doc: dict) -> list[str]:
    return [str(clip_video(doc, video_dir()).path)]


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


def process_results(doc: dict, results: list[str]) -> dict:
    """The answer in the model's reply, scored against all the clip's answers and against its label alone.

    The metrics (aggregated by their mean) come with the clip's key, the answer and how it was read
    (`reader_settings`), which lmms-eval logs with each sample (--log_samples): the samples file is
    a predictions file that `fiberbench evaluate` reads.
    """
    nlp = reader_pipeline()
    answer = read_answer(results[0], doc["masked_caption"], nlp)
    all_answers, label = references_from_example(doc), references_from_example(doc, label_only=True)
    return {
        "exact_match": exact_match(answer, all_answers),
        "f1": f1(answer, all_answers),
        "exact_match_label_only": exact_match(answer, label),
        "f1_label_only": f1(answer, label),
        **{field: doc[field] for field in KEY_FIELDS},
        "prediction": answer,
        "reader": reader_settings(nlp),
    }
