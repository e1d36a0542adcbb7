"""Finding a clip's video and sampling its frames with PyAV, checked on synthetic videos with known frames."""

import numpy as np
import pytest

from fiberbench.errors import DataError
from fiberbench.videos import (
    ClipSpan,
    ClipVideo,
    FrameSampling,
    _frames_at,
    check_video,
    find_clip_video,
    sample_frames,
    uniform_times,
)

from .conftest import write_video, write_video_claiming, write_zero_duration_video

FPS = 10


def level(index: int) -> int:
    """The grey level of frame `index` in the test videos: 10 levels apart, repeating every 25 frames."""
    return 10 * index % 250


def frame_indices(frames) -> list[int]:
    """Which frame (modulo 25) each sampled image is, read back from its grey level (lossless video)."""
    levels = [float(frame.mean()) for frame in frames]
    assert all(abs(value - round(value / 10) * 10) < 2 for value in levels), levels
    return [round(value / 10) for value in levels]


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("videos")
    write_video(folder / "abc_000003_000007.mp4", seconds=2, fps=FPS, level=level)  # a clip file
    write_video(folder / "abc.mp4", seconds=12, fps=FPS, level=level)  # the whole video of the same id
    write_video(folder / "short.mp4", seconds=5, fps=FPS, level=level)
    (folder / "broken.mp4").write_text("not a video")
    write_zero_duration_video(folder / "zero_000001_000002.mp4")
    write_audio(folder / "audio.mp4")
    return folder


def write_audio(path):
    """A file with one second of silent AAC audio and no video stream."""
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("aac", rate=8000)
        stream.layout = "mono"
        for index in range(8):
            frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
            frame.sample_rate, frame.pts = 8000, index * 1024
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def test_uniform_times_are_the_centres_of_equal_parts():
    assert uniform_times(0, 10, 4) == [1.25, 3.75, 6.25, 8.75]
    assert uniform_times(3, 7, 1) == [5.0]


def test_a_clip_file_comes_before_the_whole_video(videos):
    assert find_clip_video(videos, "abc", 3, 7) == ClipVideo(videos / "abc_000003_000007.mp4")
    assert find_clip_video(videos, "abc", 20, 30) == ClipVideo(videos / "abc.mp4", 20.0, 30.0)
    assert find_clip_video(videos, "xyz", 3, 7) is None


FOUR = FrameSampling(num_frames=4)


def test_frames_of_a_clip_file(videos):
    # 2 s: the frames on screen at 0.25, 0.75, 1.25 and 1.75 s are frames 2, 7, 12 and 17.
    clip = sample_frames(ClipVideo(videos / "abc_000003_000007.mp4"), FOUR)
    assert [frame.shape for frame in clip.frames] == [(32, 32, 3)] * 4 and clip.frames[0].dtype == np.uint8
    assert frame_indices(clip.frames) == [2, 7, 12, 17]
    assert clip.times == pytest.approx([0.2, 0.7, 1.2, 1.7])
    assert clip.span == ClipSpan(0.0, 2.0, FPS)
    assert clip.video_metadata() == {
        "total_num_frames": 20,
        "fps": FPS,
        "duration": 2.0,
        "width": 32,
        "height": 32,
        "frames_indices": [2, 7, 12, 17],
    }


def test_frames_of_a_whole_video_cut_to_the_clip(videos):
    # 3 to 7 s: frames 35, 45, 55 and 65 (modulo 25: 10, 20, 5, 15), times counted from the clip's start.
    clip = sample_frames(ClipVideo(videos / "abc.mp4", 3.0, 7.0), FOUR)
    assert frame_indices(clip.frames) == [10, 20, 5, 15]
    assert clip.times == pytest.approx([0.5, 1.5, 2.5, 3.5])
    assert clip.video_metadata()["frames_indices"] == [5, 15, 25, 35]
    assert clip.video_metadata()["total_num_frames"] == 40


@pytest.mark.parametrize("check", [check_video, sample_frames], ids=["checked", "sampled"])
def test_a_clip_that_runs_past_the_end_of_its_video_is_one_line(videos, check):
    """3 to 13 s of a 5 s video: its last 8 s are not there (they used to be sampled from the 2 s that are)."""
    with pytest.raises(DataError, match=r"short.mp4: the clip runs from 3 s to 13 s, but the video ends at 5 s: its "
                       r"last 8 s are not in the file$"):
        check(ClipVideo(videos / "short.mp4", 3.0, 13.0), FOUR)


def test_a_clip_that_ends_a_moment_after_its_video_is_cut_there(videos):
    # 3 to 5.3 s of a 5 s video (within END_TOLERANCE): 3 to 5 s, frames 32, 37, 42, 47.
    clip = sample_frames(ClipVideo(videos / "short.mp4", 3.0, 5.3), FOUR)
    assert frame_indices(clip.frames) == [7, 12, 17, 22]
    assert clip.span == ClipSpan(3.0, 5.0, FPS)


@pytest.mark.parametrize("check", [check_video, sample_frames], ids=["checked", "sampled"])
@pytest.mark.parametrize(
    "claimed, message",
    [
        (1e7, r"lies.mkv: its header says the video lasts 1e\+07 s, but its frames end at 3 s: the file is damaged"),
        (1, r"lies.mkv: its header says the video lasts 1 s, but its frames end at 3 s: the file is damaged"),
    ],
    ids=["claiming years", "claiming less"],
)
def test_a_header_that_disagrees_with_the_frames_is_one_line(tmp_path, claimed, message, check):
    """A 3 s video whose header claims 10^7 s used to be sampled as that long: at 1 frame a second, 10^7 copies of
    its last frame."""
    write_video_claiming(tmp_path / "lies.mkv", seconds=3, fps=FPS, claimed_seconds=claimed)
    with pytest.raises(DataError, match=message):
        check(ClipVideo(tmp_path / "lies.mkv"), FrameSampling(fps=1))


def test_frames_are_bounded_by_what_decodes(videos):
    """Times past the last frame that decoded (its frame interval, and END_TOLERANCE) are an error, never copies of
    it: here the frames of the first second of a 2 s clip."""
    import av

    span = ClipSpan(0.0, 2.0, FPS)
    with av.open(str(videos / "abc_000003_000007.mp4")) as container:
        decoded = [frame for frame, _ in zip(container.decode(video=0), range(10))]
    frames, _ = _frames_at(iter(decoded), uniform_times(0.0, 1.4, 4), videos / "abc.mp4", span)
    assert frame_indices(frames) == [1, 5, 8, 9]  # 1.225 s: the last frame decoded (0.9 s) is still on screen
    with pytest.raises(DataError, match=r"abc.mp4: no frame decodes after 0.9 s, but the clip runs to 2 s"):
        _frames_at(iter(decoded), uniform_times(0.0, 2.0, 4), videos / "abc.mp4", span)


@pytest.mark.parametrize(
    "sampling, count",
    [
        (FrameSampling(fps=2), 8),  # 4 s at 2 a second
        (FrameSampling(fps=2, max_frames=5), 5),
        (FrameSampling(fps=0.1), 1),  # at least one
        (FrameSampling(fps=30), 40),  # every frame of the 10 fps video
    ],
    ids=["fps", "max_frames", "at least one", "at most every frame"],
)
def test_frames_at_a_rate(videos, sampling, count):
    clip = sample_frames(ClipVideo(videos / "abc.mp4", 3.0, 7.0), sampling)
    assert len(clip.frames) == count == sampling.count(check_video(ClipVideo(videos / "abc.mp4", 3.0, 7.0), sampling))
    assert clip.times == sorted(clip.times)
    if count == 40:
        assert frame_indices(clip.frames) == [(30 + index) % 25 for index in range(40)]


def test_a_sampling_is_one_rule():
    with pytest.raises(ValueError, match="exactly one of num_frames and fps"):
        FrameSampling(num_frames=4, fps=2)
    assert "8 frames: the frames on screen at the centres" in FrameSampling(num_frames=8).rule()
    assert FrameSampling(fps=2, max_frames=32).rule().startswith("floor(seconds x 2) frames (at least 1, at most 32")


@pytest.mark.parametrize("check", [check_video, sample_frames], ids=["checked", "sampled"])
def test_more_frames_than_the_clip_has_is_one_line(videos, check):
    # 1.0 to 1.3 s at 10 fps: 3 frames.
    with pytest.raises(DataError, match=r"abc.mp4: the clip \(1-1.3 s at 10 fps\) has 3 frames, fewer than the 6"):
        check(ClipVideo(videos / "abc.mp4", 1.0, 1.3), FrameSampling(num_frames=6))


@pytest.mark.parametrize("check", [check_video, sample_frames], ids=["checked", "sampled"])
@pytest.mark.parametrize(
    "video, message",
    [
        (ClipVideo("short.mp4", 10.0, 20.0), "short.mp4: no frame between 10 s and 20 s \\(the video lasts 5 s\\)$"),
        (ClipVideo("zero_000001_000002.mp4"), "zero_000001_000002.mp4: the video lasts 0 s: no frame to sample$"),
        (ClipVideo("audio.mp4"), "audio.mp4: holds no video stream$"),
        (ClipVideo("broken.mp4"), "broken.mp4: cannot be decoded"),
        (ClipVideo("missing.mp4"), "missing.mp4: cannot be decoded"),
    ],
    ids=["outside the video", "zero duration", "no video stream", "not a video", "missing"],
)
def test_unusable_videos_are_one_line_errors(videos, video, message, check):
    with pytest.raises(DataError, match=message) as raised:
        check(ClipVideo(videos / video.path, video.start, video.end), FOUR)
    assert "\n" not in str(raised.value)


def test_usable_videos_pass_the_check(videos):
    assert check_video(ClipVideo(videos / "abc_000003_000007.mp4"), FOUR) == ClipSpan(0.0, 2.0, FPS)
    assert check_video(ClipVideo(videos / "short.mp4", 3.0, 5.3), FOUR) == ClipSpan(3.0, 5.0, FPS)
