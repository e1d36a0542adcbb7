"""Tiny random encoders built from configs (`fiberbench.testing.tiny_encoders`); synthetic videos of the sample."""

import pytest

from fiberbench.data import SAMPLE_DIR, SPLIT_FILES
from fiberbench.records import clip_id, clip_key
from fiberbench.testing.tiny_encoders import save_clip, save_videomae
from fiberbench.testing.tiny_videos import read_records, write_video

from ..built_once import built_once


@pytest.fixture(scope="session")
def encoders(tmp_path_factory):
    """Name -> the folder of a tiny random encoder: `clip` (CLIPVisionModel, D 48), `clip_dual` (CLIPModel, read
    through get_image_features: D 24) and `videomae` (4-frame windows, tubelets of 2: D 40); saved once per test run."""

    def save_all(root):
        save_clip(root / "clip")
        save_clip(root / "clip_dual", with_text=True)
        save_videomae(root / "videomae")

    root = built_once(tmp_path_factory, "encoders", save_all)
    return {name: root / name for name in ("clip", "clip_dual", "videomae")}


def clip_level(number: int):
    """Frame `index` of clip `number` is a flat grey of this level: clips differ, and so do their frames."""
    return lambda index: (37 * number + 10 * index) % 250


@pytest.fixture(scope="session")
def sample_videos(tmp_path_factory):
    """A video of every clip of the bundled sample: a file of the clip alone (2 fps), except every third test clip,
    whose whole video (1 fps, a second past the clip's end) is cut to the clip; written once per test run."""

    def write_all(folder):
        folder.mkdir()
        clips = [(split, i, record) for split in SPLIT_FILES for i, record in enumerate(read_records(SAMPLE_DIR, split))]
        for number, (split, index, record) in enumerate(clips):
            video_id, start, end = clip_key(record)
            if split == "test" and index % 3 == 1:
                write_video(folder / f"{video_id}.mp4", seconds=end + 1, fps=1, level=clip_level(number))
            else:
                write_video(folder / f"{clip_id(video_id, start, end)}.mp4", end - start, 2, level=clip_level(number))

    return built_once(tmp_path_factory, "sample_videos", lambda folder: write_all(folder / "videos")) / "videos"
