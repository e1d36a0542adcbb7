"""Synthetic videos of the bundled sample's clips (each frame a flat grey), named as the commands look for them.

python -m fiberbench.testing videos sample_videos              # every split's clips' videos
"""

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from fiberbench.data import SAMPLE_DIR
from fiberbench.data.fiber.release import SPLIT_FILES
from fiberbench.records import clip_id

from .tiny_models import FRAME_SIZE


def write_video(path: Path, seconds: float, fps: int, size: int = FRAME_SIZE, level=lambda index: 10 * index % 250):
    """A silent H.264 video whose frame `index` is a flat grey of `level(index)`, losslessly encoded."""
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps, options={"qp": "0"})
        stream.width = stream.height = size
        stream.pix_fmt = "yuv420p"
        for index in range(round(seconds * fps)):
            image = np.full((size, size, 3), level(index), dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def sample_records(split: str) -> list[dict]:
    """A split of the bundled sample, as its release-format file holds it."""
    return json.loads((SAMPLE_DIR / SPLIT_FILES[split]).read_text(encoding="utf-8"))


def sample_test_records() -> list[dict]:
    """The test split of the bundled sample, as its release-format file holds it."""
    return sample_records("test")


def write_sample_videos(folder: Path, whole_videos: bool = True, splits: Sequence[str] = ("test",)) -> int:
    """A synthetic video for every clip of the bundled sample's `splits`, named as `fiberbench predict` and
    `extract-features` look for them; returns how many clips have one.

    With `whole_videos`, every other test clip gets a whole video (`VIDEO_ID.mp4`, 1 fps, a second
    past the clip's end) to be cut to the clip; the others, and all without it, a file of the clip
    alone (`VIDEO_ID_START_END.mp4`, 2 fps), the only kind lmms-eval's models can read.
    """
    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    for split in splits:
        for index, record in enumerate(sample_records(split)):
            video_id, start, end = record["video_id"], record["video_start_time"], record["video_end_time"]
            if whole_videos and split == "test" and index % 2 == 1:
                write_video(folder / f"{video_id}.mp4", seconds=end + 1, fps=1)
            else:
                write_video(folder / f"{clip_id(video_id, start, end)}.mp4", seconds=end - start, fps=2)
            written += 1
    return written
