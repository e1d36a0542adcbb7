"""FIBER's lmms-eval tasks (fiber_test.yaml, fiber_val.yaml): each clip's video, the prompt, the answer's scores.

lmms-eval imports this file by its path (`--include_path`); it imports the installed `fiberbench`:
the video file naming and checks of `fiberbench predict`, its default prompt and its answer reader
(`fiberbench.predict.replies.read_answer`, with the noun-phrase step when an English spaCy pipeline
is installed), and the metric's plain functions, so a score here is the score `fiberbench evaluate`
gives the same answers.
"""

import functools
import os
from pathlib import Path

from fiberbench.data.fiber.validation import clip_id
from fiberbench.errors import DataError, UsageError
from fiberbench.metric import exact_match, f1, references_from_example
from fiberbench.predict.prompts import DEFAULT_PROMPT, check_template
from fiberbench.predict.replies import load_reader_pipeline, read_answer
from fiberbench.predict.videos import ClipVideo, FrameSampling, check_video, expected_names, find_clip_video

VIDEO_DIR_ENV = "FIBER_VIDEO_DIR"
KEY_FIELDS = ("video_id", "video_start_time", "video_end_time")


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
    """The split as it is, once every clip's video is found and opens as a video of at least one frame: a
    `DataError` names the first that does not, before any generation."""
    folder = video_dir()
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
    return check_template(template).format(masked_caption=doc["masked_caption"])


def doc_to_target(doc: dict) -> str:
    return doc["label"]


@functools.cache
def reader_pipeline():
    """The spaCy pipeline of the answer reader's noun-phrase step, loaded once (None, with a warning, without one)."""
    return load_reader_pipeline()


def process_results(doc: dict, results: list[str]) -> dict:
    """The answer in the model's reply, scored against all the clip's answers and against its label alone.

    The metrics (aggregated by their mean) come with the clip's key and the answer, which lmms-eval
    logs with each sample (--log_samples): the samples file is a predictions file that `fiberbench
    evaluate` reads.
    """
    answer = read_answer(results[0], doc["masked_caption"], reader_pipeline())
    all_answers, label = references_from_example(doc), references_from_example(doc, label_only=True)
    return {
        "exact_match": exact_match(answer, all_answers),
        "f1": f1(answer, all_answers),
        "exact_match_label_only": exact_match(answer, label),
        "f1_label_only": f1(answer, label),
        **{field: doc[field] for field in KEY_FIELDS},
        "prediction": answer,
    }
