"""A clip's video found and its frames sampled with PyAV (`fiberbench.videos`), on synthetic videos whose frames are
known by their grey level."""

import av
import numpy as np
import pytest

from fiberbench.errors import DataError
from fiberbench.videos import ClipSpan, ClipVideo, FrameSampling, check_video, find_clip_video, sample_frames

from .conftest import write_video, write_video_claiming, write_zero_duration_video

FPS, FOUR = 10, FrameSampling(num_frames=4)


def frame_indices(frames) -> list[int]:
    """Which frame (modulo 25) each sampled image is, read back from its grey level (10 per frame, lossless)."""
    return [round(float(frame.mean()) / 10) for frame in frames]


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("videos")
    write_video(folder / "abc_000003_000007.mp4", seconds=2, fps=FPS)  # a clip file
    write_video(folder / "abc.mp4", seconds=12, fps=FPS)  # the whole video of the same id
    write_video(folder / "short.mp4", seconds=5, fps=FPS)
    (folder / "broken.mp4").write_text("not a video")
    write_zero_duration_video(folder / "zero.mp4")
    with av.open(str(folder / "audio.mp4"), "w") as container:  # one second of silence, no video stream
        stream = container.add_stream("aac", rate=8000)
        stream.layout = "mono"
        for index in range(8):
            frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
            frame.sample_rate, frame.pts = 8000, index * 1024
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    write_video_claiming(folder / "lies.mkv", seconds=3, fps=FPS, claimed_seconds=1e7)
    return folder


def test_a_clip_file_comes_before_the_whole_video(videos):
    assert find_clip_video(videos, "abc", 3, 7) == ClipVideo(videos / "abc_000003_000007.mp4")
    assert find_clip_video(videos, "abc", 20, 30) == ClipVideo(videos / "abc.mp4", 20.0, 30.0)
    assert find_clip_video(videos, "xyz", 3, 7) is None


def test_the_frames_on_screen_at_the_centres_of_equal_parts_of_the_clip(videos):
    clip = sample_frames(ClipVideo(videos / "abc_000003_000007.mp4"), FOUR)  # 0.25, 0.75, 1.25, 1.75 s
    assert [frame.shape for frame in clip.frames] == [(32, 32, 3)] * 4 and clip.frames[0].dtype == np.uint8
    assert frame_indices(clip.frames) == [2, 7, 12, 17] and clip.times == pytest.approx([0.2, 0.7, 1.2, 1.7])
    assert clip.video_metadata() == {"total_num_frames": 20, "fps": FPS, "duration": 2.0, "width": 32, "height": 32,
                                     "frames_indices": [2, 7, 12, 17]}
    cut = sample_frames(ClipVideo(videos / "abc.mp4", 3.0, 7.0), FOUR)  # frames 35, 45, 55, 65; times from 3 s
    assert frame_indices(cut.frames) == [10, 20, 5, 15] and cut.times == pytest.approx([0.5, 1.5, 2.5, 3.5])
    assert cut.video_metadata()["frames_indices"] == [5, 15, 25, 35] and cut.video_metadata()["total_num_frames"] == 40
    ends_late = sample_frames(ClipVideo(videos / "short.mp4", 3.0, 5.3), FOUR)  # cut at 5 s, within the tolerance
    assert frame_indices(ends_late.frames) == [7, 12, 17, 22] and ends_late.span == ClipSpan(3.0, 5.0, FPS)


@pytest.mark.parametrize("sampling, count", [(FrameSampling(fps=2), 8), (FrameSampling(fps=2, max_frames=5), 5),
                                             (FrameSampling(fps=0.1), 1), (FrameSampling(fps=30), 40)],
                         ids=["fps", "max_frames", "at least one", "at most every frame"])
def test_frames_at_a_rate(videos, sampling, count):
    video = ClipVideo(videos / "abc.mp4", 3.0, 7.0)
    clip = sample_frames(video, sampling)
    assert len(clip.frames) == count == sampling.count(check_video(video, sampling))
    assert clip.times == sorted(clip.times)
    assert count != 40 or frame_indices(clip.frames) == [(30 + index) % 25 for index in range(40)]
    with pytest.raises(ValueError, match="exactly one of num_frames and fps"):
        FrameSampling(num_frames=4, fps=2)


@pytest.mark.parametrize("check", [check_video, sample_frames], ids=["checked", "sampled"])
@pytest.mark.parametrize("video, sampling, message", [
    (ClipVideo("short.mp4", 3.0, 13.0), FOUR, r"short.mp4: the clip runs from 3 s to 13 s, but the video ends at 5 s: "
     "its last 8 s are not in the file$"),
    (ClipVideo("lies.mkv"), FrameSampling(fps=1), r"lies.mkv: its header says the video lasts 1e\+07 s, but its frames "
     "end at 3 s: the file is damaged or its header is wrong$"),
    (ClipVideo("abc.mp4", 1.0, 1.3), FrameSampling(num_frames=6), r"abc.mp4: the clip \(1-1.3 s at 10 fps\) has 3 "
     r"frames, fewer than the 6 asked \(--num_frames\)$"),
    (ClipVideo("short.mp4", 10.0, 20.0), FOUR, r"short.mp4: no frame between 10 s and 20 s \(the video lasts 5 s\)$"),
    (ClipVideo("zero.mp4"), FOUR, "zero.mp4: the video lasts 0 s: no frame to sample$"),
    (ClipVideo("audio.mp4"), FOUR, "audio.mp4: holds no video stream$"),
    (ClipVideo("broken.mp4"), FOUR, "broken.mp4: cannot be decoded"),
    (ClipVideo("missing.mp4"), FOUR, "missing.mp4: cannot be decoded"),
], ids=["past its end", "a header claiming years", "fewer frames than asked", "outside the video", "zero duration",
        "no video stream", "not a video", "missing"])
def test_an_unusable_video_is_one_line(videos, video, sampling, message, check):
    with pytest.raises(DataError, match=message) as raised:
        check(ClipVideo(videos / video.path, video.start, video.end), sampling)
    assert "\n" not in str(raised.value)
