"""A clip's video for video-language models: its file in --video_dir, and frames sampled uniformly with PyAV.

A clip's video is either a file of the clip alone, named by VaTeX's clip id
(`{video_id}_{start:06d}_{end:06d}.mp4`), or the whole YouTube video (`{video_id}.mp4`), cut to the
clip's times. PyAV decodes both: torchcodec's CPU wheels need CUDA libraries to import, and
transformers' video processors need torchvision, so neither is relied on here.
"""

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fiberbench.data.fiber.validation import clip_id
from fiberbench.errors import DataError

VIDEO_EXTENSIONS = (".mp4", ".mkv", ".webm")


@dataclass(frozen=True)
class ClipVideo:
    """Where a clip's frames are: `path`, from `start` to `end` seconds, or the whole file when both are None."""

    path: Path
    start: float | None = None
    end: float | None = None


def find_clip_video(video_dir: Path, video_id: str, start: int, end: int) -> ClipVideo | None:
    """The clip's own file if there is one, else the whole video cut to [start, end); None when neither exists."""
    for extension in VIDEO_EXTENSIONS:
        clip_file = video_dir / f"{clip_id(video_id, start, end)}{extension}"
        if clip_file.is_file():
            return ClipVideo(clip_file)
    for extension in VIDEO_EXTENSIONS:
        whole_file = video_dir / f"{video_id}{extension}"
        if whole_file.is_file():
            return ClipVideo(whole_file, float(start), float(end))
    return None


def expected_names(video_id: str, start: int, end: int) -> str:
    """The file names `find_clip_video` looks for, for error messages."""
    return f"{clip_id(video_id, start, end)}.mp4 or {video_id}.mp4 (or .mkv, .webm)"


def uniform_times(start: float, end: float, num_frames: int) -> list[float]:
    """The centres of `num_frames` equal parts of [start, end): where uniformly sampled frames are taken."""
    step = (end - start) / num_frames
    return [start + (index + 0.5) * step for index in range(num_frames)]


def check_video(video: ClipVideo) -> None:
    """Check, without decoding a frame, that frames can be sampled from `video`: its file opens, holds a video
    stream of known duration, and the clip's times lie in it.

    Raises:
        DataError: naming the file and what is wrong with it.
    """
    with _opened(video) as container:
        _clip_span(container, video)


def sample_frames(video: ClipVideo, num_frames: int) -> list[np.ndarray]:
    """`num_frames` RGB frames (height, width, 3; uint8), uniformly spread over the clip, in time order.

    Each frame is the one on screen at its time (`uniform_times`). The video is decoded once, from
    the key frame before the clip's start up to the last frame needed.

    Raises:
        DataError: the file cannot be decoded, has no video stream, or has no frame in the clip's times.
    """
    with _opened(video) as container:
        stream, start, end = _clip_span(container, video)
        if start > _first_time(stream):
            container.seek(int(start / stream.time_base), stream=stream, backward=True, any_frame=False)
        return _frames_at(container.decode(stream), uniform_times(start, end, num_frames), video.path)


@contextmanager
def _opened(video: ClipVideo):
    """The video's file opened with PyAV; FFmpeg's errors, then or while decoding, become DataErrors naming it."""
    import av

    try:
        with av.open(str(video.path)) as container:
            yield container
    except av.error.FFmpegError as error:
        raise DataError(f"{video.path}: cannot be decoded ({error.strerror or error})") from error


def _clip_span(container, video: ClipVideo) -> tuple:
    """The file's first video stream and the clip's seconds in it, [start, end), cut at the end of the video."""
    if not container.streams.video:
        raise DataError(f"{video.path}: holds no video stream")
    stream = container.streams.video[0]
    first = _first_time(stream)
    length = _duration(container, stream)
    start = first if video.start is None else video.start
    end = first + length if video.end is None else min(video.end, first + length)
    if end <= start:
        if video.end is None:  # a clip's own file
            raise DataError(f"{video.path}: the video lasts {length:g} s: no frame to sample")
        raise DataError(
            f"{video.path}: no frame between {video.start:g} s and {video.end:g} s (the video lasts {length:g} s)"
        )
    return stream, start, end


def _first_time(stream) -> float:
    """Seconds of the stream's first frame (0 when its header does not say)."""
    return float(stream.start_time * stream.time_base) if stream.start_time is not None else 0.0


def _duration(container, stream) -> float:
    """Seconds of video, from the stream's header or else the container's."""
    if stream.duration is not None:
        return float(stream.duration * stream.time_base)
    if container.duration is not None:
        return container.duration / 1_000_000  # the container's duration is in microseconds (AV_TIME_BASE)
    raise DataError(f"{container.name}: its duration is unknown, so its frames cannot be spread over it")


def _frames_at(frames, times: list[float], path: Path) -> list[np.ndarray]:
    """From decoded `frames` in time order, the one on screen at each of `times` (sorted)."""
    chosen = []
    previous = None
    for frame in frames:
        if frame.time is None:  # no timestamp: it cannot be placed in time
            continue
        while len(chosen) < len(times) and frame.time > times[len(chosen)]:
            # The previous frame is still on screen at this time (the first frame, if none came before).
            chosen.append((frame if previous is None else previous).to_ndarray(format="rgb24"))
        if len(chosen) == len(times):
            return chosen
        previous = frame
    if previous is None:
        raise DataError(f"{path}: no frame could be decoded in the clip's times")
    # The last frames needed lie after the last decoded frame: it stays on screen until the end.
    last = previous.to_ndarray(format="rgb24")
    return chosen + [last] * (len(times) - len(chosen))
