"""A clip's video for video-language models: its file in --video_dir, and frames sampled with PyAV.

A clip's video is either a file of the clip alone, named by VaTeX's clip id
(`{video_id}_{start:06d}_{end:06d}.mp4`), or the whole YouTube video (`{video_id}.mp4`), cut to the
clip's times. PyAV decodes both, once per clip and only within the clip's times: torchcodec's CPU
wheels need CUDA libraries to import, so it is not relied on here. A file's header is not trusted
for its length: the clip's times must lie in the frames the file holds, and the header's duration
must agree with them, and a clip must last at least one frame: every command checks its clips' videos so before any
work, by one function (`check_clip_videos`). Which frames are taken is a `FrameSampling`, chosen
by one rule (`choose_sampling`) for every command; what comes back (`ClipFrames`)
carries the frames' times, which video processors read as transformers' video metadata.
"""

import logging
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fiberbench.records import ClipKey, clip_id
from fiberbench.errors import DataError

logger = logging.getLogger(__name__)

VIDEO_EXTENSIONS = (".mp4", ".mkv", ".webm")
# Seconds by which a video's frames may end before (or after) its header's duration, or before a clip's end, with
# the clip still taken from them: a clip's times are whole seconds, and a file may end a few frames short of them.
END_TOLERANCE = 0.5


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


@dataclass(frozen=True)
class Clip:
    """A clip a command works on: `name`, what the command calls it (in its messages, its output files); its `video`
    (None: none found); its dataset `key` (None for a whole file of a folder, which cannot be missing)."""

    name: str
    video: ClipVideo | None
    key: ClipKey | None = None


@dataclass(frozen=True)
class FrameSampling:
    """Which frames of a clip a model sees: `num_frames` of them, or `fps` a second up to `max_frames`.

    Either way the frames are those on screen at the centres of equal parts of the clip
    (`uniform_times`). A fixed `num_frames` must not exceed the frames the clip has; with `fps`, a
    clip whose video has fewer frames a second gives every frame it has.
    """

    num_frames: int | None = None
    fps: float | None = None
    max_frames: int | None = None

    def __post_init__(self):
        if (self.num_frames is None) == (self.fps is None):
            raise ValueError("give exactly one of num_frames and fps")

    def count(self, span: "ClipSpan") -> int:
        """How many frames the clip of `span` gives."""
        if self.num_frames is not None:
            return self.num_frames
        wanted = max(1, math.floor(span.duration * self.fps + 1e-6))  # as `ClipSpan.num_frames` counts
        return min(wanted, span.num_frames, self.max_frames or wanted)

    def rule(self) -> str:
        """The sampling in words, as the predictions' metadata records it."""
        if self.num_frames is not None:
            count = f"{self.num_frames} frames"
        else:
            limit = f", at most {self.max_frames}" if self.max_frames else ""
            count = f"floor(seconds x {self.fps:g}) frames (at least 1{limit}, at most the clip's own)"
        return f"{count}: the frames on screen at the centres of equal parts of the clip's [start, end)"


@dataclass(frozen=True)
class ClipSpan:
    """Where a clip lies in its video's file: `start` to `end` seconds, at the video's frame rate `fps`."""

    start: float
    end: float
    fps: float

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def num_frames(self) -> int:
        """Frames of the clip: a frame interval of it a frame (`check_video` refuses a clip of none)."""
        # The epsilon keeps 10 s at 2 fps at 20 frames despite floating-point error.
        return math.floor(self.duration * self.fps + 1e-6)


@dataclass(frozen=True)
class ClipFrames:
    """The frames sampled from a clip, in time order, with where they lie in it."""

    frames: list[np.ndarray]  # RGB, (height, width, 3), uint8
    times: list[float]  # seconds from the clip's start at which each frame comes on screen (0 for one before it)
    span: ClipSpan

    def video_metadata(self) -> dict:
        """The clip as transformers' `VideoMetadata` describes a video and the frames sampled from it.

        Qwen3-VL, GLM-4.1V and SmolVLM write each frame's time into the prompt from `fps` and
        `frames_indices`; Qwen2.5-VL's temporal positions come from `fps` over the frames sampled.
        The clip is the video here: indices and duration count from its start.
        """
        height, width = self.frames[0].shape[:2]
        fps = self.span.fps
        last = self.span.num_frames - 1
        return {
            "total_num_frames": self.span.num_frames,
            "fps": fps,
            "duration": self.span.duration,
            "width": width,
            "height": height,
            "frames_indices": [min(last, round(time * fps)) for time in self.times],
        }


def choose_sampling(
    num_frames: int | None, fps: float | None, max_frames: int | None, default: FrameSampling
) -> FrameSampling:
    """The one rule of every command that samples frames: --num_frames, else --fps (up to --max_frames), else
    `default`, the model's own (a video processor's or an encoder's sampling, or the command's default)."""
    if num_frames is not None:
        return FrameSampling(num_frames=num_frames)
    if fps is not None:
        return FrameSampling(fps=fps, max_frames=max_frames)
    return default


def expected_names(video_id: str, start: int, end: int) -> str:
    """The file names `find_clip_video` looks for, for error messages."""
    return f"{clip_id(video_id, start, end)}.mp4 or {video_id}.mp4 (or .mkv, .webm)"


def uniform_times(start: float, end: float, num_frames: int) -> list[float]:
    """The centres of `num_frames` equal parts of [start, end): where uniformly sampled frames are taken."""
    step = (end - start) / num_frames
    return [start + (index + 0.5) * step for index in range(num_frames)]


def check_video(video: ClipVideo, sampling: FrameSampling) -> ClipSpan:
    """Check, without decoding a frame, that `sampling` can take its frames from `video`: its file opens, holds a
    video stream of known duration and frame rate whose last packets end where its header says, the clip's times
    lie in it, and the clip has the frames asked.

    Returns:
        Where the clip lies in the file.

    Raises:
        DataError: naming the file and what is wrong with it.
    """
    with _opened(video) as container:
        _, span = _clip_span(container, video, sampling)
    return span


def check_clip_videos(
    clips: list[Clip],
    sampling: FrameSampling,
    video_dir: Path,
    skip_missing: bool,
    *,
    skipping: str,
    skipped: str,
    unusable_advice: str | None = None,
) -> list[ClipSpan | None]:
    """Where each clip lies in its video (None for a missing one), every video opened and checked for `sampling`.

    Every command that reads clips calls this before any work, so that a bad video is one error line on every
    process at once, not a failure of one process in the middle of a run. A missing video is refused, or skipped
    with `skip_missing` (--skip_missing_videos) and warned of. The command's own words end its messages:
    `skipping` what --skip_missing_videos would do ("Pass --skip_missing_videos to {skipping}"), `skipped` what
    became of the skipped clips, `unusable_advice` what to do about an unusable video.

    Raises:
        DataError: naming the first missing (without `skip_missing`) or unusable video, and how many there are.
    """
    from tqdm.auto import tqdm

    missing = [clip for clip in clips if clip.video is None]
    if missing and not skip_missing:
        video_id, start, end = missing[0].key
        raise DataError(
            f"--video_dir {video_dir}: no video for clip {video_id} ({start}-{end} s): looked for "
            f"{expected_names(video_id, start, end)}; {len(missing)} of {len(clips)} clips have none. Pass "
            f"--skip_missing_videos to {skipping}"
        )
    spans, unusable = [], []
    # Under `accelerate launch` every process checks every video; the first of each machine shows the bar.
    quiet = os.environ.get("LOCAL_RANK", "0") != "0"
    for clip in tqdm(clips, desc="Checking the clips' videos", unit="video", disable=quiet):
        try:
            spans.append(None if clip.video is None else check_video(clip.video, sampling))
        except DataError as error:
            unusable.append((clip, error))
    if unusable:
        clip, error = unusable[0]
        advice = f": {unusable_advice}" if unusable_advice else ""
        raise DataError(
            f"{error} (the video of clip {clip.name}); {len(unusable)} of {len(clips)} clips' videos cannot be used"
            f"{advice}"
        )
    if missing:
        logger.warning("%d of %d clips have no video in %s: %s", len(missing), len(clips), video_dir, skipped)
    return spans


def sample_frames(video: ClipVideo, sampling: FrameSampling) -> ClipFrames:
    """The clip's frames that `sampling` takes, with their times.

    Each frame is the one on screen at its time (`uniform_times`). The video is decoded once, from
    the key frame before the clip's start up to the last frame needed.

    Raises:
        DataError: the file cannot be decoded, has no video stream, has no frame in the clip's times (or not
            until its end), a header that disagrees with its frames, or fewer frames than a fixed number asked.
    """
    with _opened(video) as container:
        stream, span = _clip_span(container, video, sampling)
        # From the key frame before the clip's start (`_clip_span` read the end of the file).
        start = max(span.start, _first_time(stream))
        container.seek(int(start / stream.time_base), stream=stream, backward=True, any_frame=False)
        times = uniform_times(span.start, span.end, sampling.count(span))
        frames, frame_times = _frames_at(container.decode(stream), times, video.path, span)
    return ClipFrames(frames, [max(0.0, time - span.start) for time in frame_times], span)


@contextmanager
def _opened(video: ClipVideo):
    """The video's file opened with PyAV; FFmpeg's errors, then or while decoding, become DataErrors naming it."""
    import av

    try:
        with av.open(str(video.path)) as container:
            yield container
    except av.error.FFmpegError as error:
        raise DataError(f"{video.path}: cannot be decoded ({error.strerror or error})") from error


def _clip_span(container, video: ClipVideo, sampling: FrameSampling) -> tuple:
    """The file's first video stream and the clip's `ClipSpan` in it.

    The header's duration is checked against the times of the frames the file holds (`_frames_end`):
    a header that claims more (or less) than there is, and a clip that runs past the last frame of
    its whole video, are refused rather than filled with copies of a last frame.
    """
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
    rate = stream.average_rate or stream.guessed_rate
    if not rate:
        raise DataError(f"{video.path}: its frame rate is unknown, so its frames cannot be placed in time")
    frames_end = _frames_end(container, stream, first + length, float(rate))
    if abs(frames_end - (first + length)) > END_TOLERANCE:
        raise DataError(
            f"{video.path}: its header says the video lasts {length:g} s, but its frames end at {frames_end - first:g} "
            "s: the file is damaged or its header is wrong"
        )
    if video.end is not None and video.end > frames_end + END_TOLERANCE:
        raise DataError(
            f"{video.path}: the clip runs from {video.start:g} s to {video.end:g} s, but the video ends at "
            f"{frames_end:g} s: its last {video.end - frames_end:g} s are not in the file"
        )
    span = ClipSpan(start, min(end, frames_end), float(rate))
    if span.num_frames < 1:
        raise DataError(
            f"{video.path}: the clip lasts {span.duration:.3g} s ({span.start:g}-{span.end:g} s), less than one frame "
            f"at {span.fps:g} fps: no frame to sample"
        )
    if sampling.num_frames is not None and sampling.num_frames > span.num_frames:
        raise DataError(
            f"{video.path}: the clip ({span.start:g}-{span.end:g} s at {span.fps:g} fps) has {span.num_frames} "
            f"frame{'s' * (span.num_frames != 1)}, fewer than the {sampling.num_frames} asked (--num_frames)"
        )
    return stream, span


def _frames_end(container, stream, header_end: float, fps: float) -> float:
    """Seconds at which the stream's last frame leaves the screen (a frame interval after it comes on), read from the
    times of its last packets: from the key frame before `header_end`, where the header says the video ends, to the
    end of the file. Nothing is decoded; a header claiming years reads the same last few packets."""
    container.seek(int(header_end / stream.time_base), stream=stream, backward=True, any_frame=False)
    times = [packet.pts for packet in container.demux(stream) if packet.pts is not None]
    if not times:
        raise DataError(f"{container.name}: no frame could be read before the end its header gives ({header_end:g} s)")
    return float(max(times) * stream.time_base) + 1 / fps


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


def _frames_at(frames, times: list[float], path: Path, span: ClipSpan) -> tuple[list[np.ndarray], list[float]]:
    """From decoded `frames` in time order, the one on screen at each of `times` (sorted), and when each came on.

    The last frame decoded stays on screen for a frame interval (`span.fps`), no longer: times past
    it (frames that would not decode) are an error, never copies of it.
    """
    chosen = []
    previous = None
    for frame in frames:
        if frame.time is None:  # no timestamp: it cannot be placed in time
            continue
        while len(chosen) < len(times) and frame.time > times[len(chosen)]:
            # The previous frame is still on screen at this time (the first frame, if none came before).
            chosen.append(frame if previous is None else previous)
        if len(chosen) == len(times):
            break
        previous = frame
    if previous is None and not chosen:
        raise DataError(f"{path}: no frame could be decoded in the clip's times")
    if len(chosen) < len(times):
        shown_until = previous.time + 1 / span.fps
        if times[-1] > shown_until + END_TOLERANCE:
            raise DataError(
                f"{path}: no frame decodes after {previous.time:g} s, but the clip runs to {span.end:g} s "
                "(the file is damaged)"
            )
        # The last frames needed lie after the last decoded frame: it stays on screen until the end.
        chosen += [previous] * (len(times) - len(chosen))
    images = {id(frame): frame.to_ndarray(format="rgb24") for frame in chosen}
    return [images[id(frame)] for frame in chosen], [float(frame.time) for frame in chosen]
