"""A clip's video (its file in --video_dir) and its frames sampled with PyAV, for every command that reads clips.

A clip's video is a file of the clip alone (`{video_id}_{start:06d}_{end:06d}.mp4`, VaTeX's clip id) or the whole video
(`{video_id}.mp4`) cut to the clip's times, decoded once and only within them (torchcodec's CPU wheels need CUDA to
import). A header is not trusted for a file's length: the clip must lie in the frames the file holds, the header must
agree with them, and the clip must last a frame (`check_clip_videos`, before any work). The frames taken are a
`FrameSampling` chosen by one rule (`choose_sampling`); `ClipFrames` carries their times for video processors.
"""

import logging
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from fiberbench.errors import DataError
from fiberbench.records import ClipKey, clip_id

logger = logging.getLogger(__name__)

VIDEO_EXTENSIONS = (".mp4", ".mkv", ".webm")
# Seconds by which frames may end before (or after) the header's duration or a clip's end (whole seconds) and be used.
END_TOLERANCE = 0.5


@dataclass(frozen=True)
class ClipVideo:
    """Where a clip's frames are: `path`, from `start` to `end` seconds, or the whole file when both are None."""

    path: Path
    start: float | None = None
    end: float | None = None


@dataclass(frozen=True)
class Clip:
    """A clip: `name` (in messages), its `video` (None: none found), its dataset `key` (None: a file of a folder)."""

    name: str
    video: ClipVideo | None
    key: ClipKey | None = None


@dataclass(frozen=True)
class ClipSpan:
    """Where a clip lies in its video's file: `start` to `end` seconds, at the video's frame rate `fps`."""

    start: float
    end: float
    fps: float

    duration = property(lambda self: self.end - self.start)
    num_frames = property(lambda self: math.floor(self.duration * self.fps + 1e-6))  # 10 s at 2 fps: 20, not 19


@dataclass(frozen=True)
class FrameSampling:
    """`num_frames` frames of a clip, or `fps` a second up to `max_frames` (at least one, at most the clip's own): the
    frames on screen at the centres of equal parts of the clip."""

    num_frames: int | None = None
    fps: float | None = None
    max_frames: int | None = None

    def __post_init__(self):
        if (self.num_frames is None) == (self.fps is None):
            raise ValueError("give exactly one of num_frames and fps")

    def count(self, span: ClipSpan) -> int:  # how many frames the clip of `span` gives
        if self.num_frames is not None:
            return self.num_frames
        wanted = max(1, math.floor(span.duration * self.fps + 1e-6))
        return min(wanted, span.num_frames, self.max_frames or wanted)

    def rule(self) -> str:  # the sampling in words, as the commands' records keep it
        limit = f", at most {self.max_frames}" if self.max_frames else ""
        count = f"{self.num_frames} frames" if self.num_frames is not None else (
            f"floor(seconds x {self.fps:g}) frames (at least 1{limit}, at most the clip's own)")
        return f"{count}: the frames on screen at the centres of equal parts of the clip's [start, end)"


@dataclass(frozen=True)
class ClipFrames:
    """The frames sampled from a clip (RGB, uint8), with the seconds from the clip's start each came on screen."""

    frames: list[np.ndarray]
    times: list[float]
    span: ClipSpan

    def video_metadata(self) -> dict:
        """The clip as transformers' `VideoMetadata`, from its start (Qwen3-VL, GLM-4V and SmolVLM write the times)."""
        (height, width), span = self.frames[0].shape[:2], self.span
        indices = [min(span.num_frames - 1, round(time * span.fps)) for time in self.times]
        return {"total_num_frames": span.num_frames, "fps": span.fps, "duration": span.duration, "width": width,
                "height": height, "frames_indices": indices}


def choose_sampling(num_frames: int | None, fps: float | None, max_frames: int | None, default: FrameSampling):
    """The one rule of every command: --num_frames, else --fps (up to --max_frames), else the model's `default`."""
    if num_frames is not None:
        return FrameSampling(num_frames=num_frames)
    return FrameSampling(fps=fps, max_frames=max_frames) if fps is not None else default


def find_clip_video(video_dir: Path, video_id: str, start: int, end: int) -> ClipVideo | None:
    """The clip's own file if there is one, else the whole video cut to [start, end); None when neither exists."""
    for name, cut in ((clip_id(video_id, start, end), ()), (video_id, (float(start), float(end)))):
        for extension in VIDEO_EXTENSIONS:
            if (video_dir / f"{name}{extension}").is_file():
                return ClipVideo(video_dir / f"{name}{extension}", *cut)
    return None


def expected_names(video_id: str, start: int, end: int) -> str:
    """The file names `find_clip_video` looks for, for error messages."""
    return f"{clip_id(video_id, start, end)}.mp4 or {video_id}.mp4 (or .mkv, .webm)"


def check_video(video: ClipVideo, sampling: FrameSampling) -> ClipSpan:
    """Where the clip lies in its file, checked without decoding a frame to give the frames of `sampling` (a
    `DataError` naming the file and what is wrong)."""
    with _opened(video) as container:
        return _clip_span(container, video, sampling)[1]


def check_clip_videos(clips: list[Clip], sampling: FrameSampling, video_dir: Path, skip_missing: bool, *,
                      skipping: str, skipped: str, unusable_advice: str | None = None) -> list[ClipSpan | None]:
    """Where each clip lies in its video (None: missing), every video opened and checked before any work. A missing
    one is refused, or with `skip_missing` (--skip_missing_videos) warned of. The messages end in the command's words:
    what --skip_missing_videos would do (`skipping`), became of the skipped clips, to do about an unusable video."""
    missing = [clip for clip in clips if clip.video is None]
    if missing and not skip_missing:
        video_id, start, end = missing[0].key
        raise DataError(f"--video_dir {video_dir}: no video for clip {video_id} ({start}-{end} s): looked for "
                        f"{expected_names(video_id, start, end)}; {len(missing)} of {len(clips)} clips have none. Pass "
                        f"--skip_missing_videos to {skipping}")
    spans, unusable = [], []
    # Under `accelerate launch` every process checks every video; the first of each machine shows the bar.
    quiet = os.environ.get("LOCAL_RANK", "0") != "0" or not os.isatty(2)
    for clip in tqdm(clips, desc="Checking the clips' videos", unit="video", disable=quiet):
        try:
            spans.append(None if clip.video is None else check_video(clip.video, sampling))
        except DataError as error:
            unusable.append((clip, error))
    if unusable:
        raise DataError(f"{unusable[0][1]} (the video of clip {unusable[0][0].name}); {len(unusable)} of {len(clips)} "
                        "clips' videos cannot be used" + (f": {unusable_advice}" if unusable_advice else ""))
    if missing:
        logger.warning("%d of %d clips have no video in %s: %s", len(missing), len(clips), video_dir, skipped)
    return spans


def sample_frames(video: ClipVideo, sampling: FrameSampling) -> ClipFrames:
    """The clip's frames that `sampling` takes, each the one on screen at the centre of its equal part of the clip,
    decoded once from the key frame before the clip's start; a `DataError` for a file that does not give them."""
    with _opened(video) as container:
        stream, span = _clip_span(container, video, sampling)
        start = max(span.start, _first_time(stream))
        container.seek(int(start / stream.time_base), stream=stream, backward=True, any_frame=False)
        step = span.duration / sampling.count(span)
        times = [span.start + (index + 0.5) * step for index in range(sampling.count(span))]
        frames, frame_times = _frames_at(container.decode(stream), times, video.path, span)
    return ClipFrames(frames, [max(0.0, time - span.start) for time in frame_times], span)


@contextmanager
def _opened(video: ClipVideo):
    """The video's file opened with PyAV; FFmpeg's errors, then or while decoding, become DataErrors naming it."""
    import av  # the `video` extra

    try:
        with av.open(str(video.path)) as container:
            yield container
    except av.error.FFmpegError as error:
        raise DataError(f"{video.path}: cannot be decoded ({error.strerror or error})") from error


def _clip_span(container, video: ClipVideo, sampling: FrameSampling) -> tuple:
    """The file's first video stream and the clip's `ClipSpan` in it, the header checked against the last packets."""
    if not container.streams.video:
        raise DataError(f"{video.path}: holds no video stream")
    stream = container.streams.video[0]
    first, length = _first_time(stream), _duration(container, stream)
    start = first if video.start is None else video.start
    end = first + length if video.end is None else min(video.end, first + length)
    if end <= start:
        raise DataError(f"{video.path}: " + (f"the video lasts {length:g} s: no frame to sample" if video.end is None
                        else f"no frame between {video.start:g} s and {video.end:g} s (the video lasts {length:g} s)"))
    if not (rate := stream.average_rate or stream.guessed_rate):
        raise DataError(f"{video.path}: its frame rate is unknown, so its frames cannot be placed in time")
    # Where the frames end, from the last packets' times (nothing decoded: a header claiming years reads the same).
    container.seek(int((first + length) / stream.time_base), stream=stream, backward=True, any_frame=False)
    if not (times := [packet.pts for packet in container.demux(stream) if packet.pts is not None]):
        raise DataError(f"{container.name}: no frame could be read before the end its header gives "
                        f"({first + length:g} s)")
    frames_end = float(max(times) * stream.time_base) + 1 / float(rate)
    if abs(frames_end - (first + length)) > END_TOLERANCE:
        raise DataError(f"{video.path}: its header says the video lasts {length:g} s, but its frames end at "
                        f"{frames_end - first:g} s: the file is damaged or its header is wrong")
    if video.end is not None and video.end > frames_end + END_TOLERANCE:
        raise DataError(f"{video.path}: the clip runs from {video.start:g} s to {video.end:g} s, but the video ends at "
                        f"{frames_end:g} s: its last {video.end - frames_end:g} s are not in the file")
    span = ClipSpan(start, min(end, frames_end), float(rate))
    if span.num_frames < 1:
        raise DataError(f"{video.path}: the clip lasts {span.duration:.3g} s ({span.start:g}-{span.end:g} s), less "
                        f"than one frame at {span.fps:g} fps: no frame to sample")
    if sampling.num_frames is not None and sampling.num_frames > span.num_frames:
        raise DataError(f"{video.path}: the clip ({span.start:g}-{span.end:g} s at {span.fps:g} fps) has "
                        f"{span.num_frames} frame{'s' * (span.num_frames != 1)}, fewer than the {sampling.num_frames} "
                        "asked (--num_frames)")
    return stream, span


def _first_time(stream) -> float:  # seconds of its first frame
    return float(stream.start_time * stream.time_base) if stream.start_time is not None else 0.0


def _duration(container, stream) -> float:
    """Seconds of video, from the stream's header or else the container's (in microseconds)."""
    if stream.duration is None and container.duration is None:
        raise DataError(f"{container.name}: its duration is unknown, so its frames cannot be spread over it")
    return float(stream.duration * stream.time_base) if stream.duration is not None else container.duration / 1e6


def _frames_at(frames, times: list[float], path: Path, span: ClipSpan) -> tuple[list[np.ndarray], list[float]]:
    """From decoded `frames` in time order, the one on screen at each of `times` (sorted), and when each came on. The
    last frame decoded stays on screen for a frame interval, no longer: times past it are an error, never copies."""
    chosen, previous = [], None
    for frame in (frame for frame in frames if frame.time is not None):  # a frame without a time cannot be placed
        while len(chosen) < len(times) and frame.time > times[len(chosen)]:
            chosen.append(frame if previous is None else previous)
        if len(chosen) == len(times):
            break
        previous = frame
    if previous is None and not chosen:
        raise DataError(f"{path}: no frame could be decoded in the clip's times")
    if len(chosen) < len(times) and times[-1] > previous.time + 1 / span.fps + END_TOLERANCE:
        raise DataError(f"{path}: no frame decodes after {previous.time:g} s, but the clip runs to {span.end:g} s (the "
                        "file is damaged)")
    chosen += [previous] * (len(times) - len(chosen))
    images = {id(frame): frame.to_ndarray(format="rgb24") for frame in chosen}
    return [images[id(frame)] for frame in chosen], [float(frame.time) for frame in chosen]
