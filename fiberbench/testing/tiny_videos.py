"""Synthetic videos (each frame a flat grey) of release-format records' clips, named as the commands look for them."""

import json
from pathlib import Path

import numpy as np

from fiberbench.records import clip_id

FRAME_SIZE = 32  # pixels; the tiny models' CLIP towers read 32x32 frames in 8x8 patches: 16 tokens per frame
# The release's file of each split (SPEC: train.json, val.json, test.json), as `--data_dir` folders hold them.
SPLIT_FILES = {"train": "train.json", "validation": "val.json", "test": "test.json"}


def write_video(path: Path, seconds: float, fps: int, size: int = FRAME_SIZE, level=lambda index: 10 * index % 250):
    """A silent H.264 video whose frame `index` is a flat grey of `level(index)`, losslessly encoded."""
    import av  # the `video` extra

    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps, options={"qp": "0"})
        stream.width = stream.height = size
        stream.pix_fmt = "yuv420p"
        for index in range(round(seconds * fps)):
            image = np.full((size, size, 3), level(index), dtype=np.uint8)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        container.mux(stream.encode())


def read_records(data_dir: Path, split: str) -> list[dict]:
    """A split's records in a release-format folder (such as the bundled sample, dataset_script/fiber/sample)."""
    return json.loads((Path(data_dir) / SPLIT_FILES[split]).read_text(encoding="utf-8"))


def write_videos(folder: Path, records: list[dict], whole_videos: bool = False) -> None:
    """A video of each record's clip: its own file (`VIDEO_ID_START_END.mp4`, 2 fps: what lmms-eval's models read), or
    with `whole_videos` for every other clip its whole video (`VIDEO_ID.mp4`, 1 fps, a second past the clip) to cut."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, record in enumerate(records):
        video_id, start, end = record["video_id"], record["video_start_time"], record["video_end_time"]
        if whole_videos and index % 2 == 1:
            write_video(folder / f"{video_id}.mp4", seconds=end + 1, fps=1)
        else:
            write_video(folder / f"{clip_id(video_id, start, end)}.mp4", seconds=end - start, fps=2)
