"""The data side of training: splits, examples read a batch at a time, the collator, workers, length grouping."""

import pickle
import threading

import pytest
import torch
from huggingface_hub.utils import get_session
from transformers import AutoTokenizer

from fiberbench.errors import DataError
from fiberbench.modeling import SAMPLE_TOKENIZER_PATH, FiberProcessor
from fiberbench.training.inputs import (
    FiberDataCollator,
    FiberExamples,
    LengthGroupedSampler,
    load_splits,
    make_dataloader,
)
from fiberbench.training.launch import forkserver_context


@pytest.fixture(scope="module")
def splits():
    return load_splits(None, "i3d", "early")


@pytest.fixture(scope="module")
def processor():
    return FiberProcessor(AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH))


def test_a_fusion_model_on_a_config_without_video_fails_at_once():
    with pytest.raises(DataError, match="--fusion late needs video features.*--dataset_config_name i3d"):
        load_splits(None, "text", "late")


def test_a_missing_dataset_folder_is_named(tmp_path):
    with pytest.raises(DataError, match="no such folder"):
        load_splits(str(tmp_path / "no" / "such" / "fiber"), "text", "none")


def test_examples_are_read_a_batch_at_a_time_as_the_rows_are(splits):
    examples = FiberExamples(splits["train"], with_video=True)
    batch = examples.__getitems__([3, 0, 7])
    rows = splits["train"].with_format("numpy")[[3, 0, 7]]
    assert [example["index"] for example in batch] == [3, 0, 7]
    assert [example["masked_caption"] for example in batch] == list(rows["masked_caption"])
    for example, clip in zip(batch, rows["video_features"]):
        assert example["video_features"].dtype == clip.dtype and (example["video_features"] == clip).all()
    assert examples[3]["label"] == batch[0]["label"]


def test_training_batches_are_the_model_inputs(splits, processor):
    loader = make_dataloader(
        FiberExamples(splits["train"], True), batch_size=5, shuffle=False, seed=0, processor=processor
    )
    batch = next(iter(loader))
    assert set(batch) == {"input_ids", "attention_mask", "video_features", "video_attention_mask", "labels"}
    assert batch["video_features"].shape[0] == 5 and batch["video_features"].shape[2] == 1024
    frames = [len(clip) for clip in splits["train"][:5]["video_features"]]
    assert batch["video_attention_mask"].sum(dim=1).tolist() == frames
    raw = next(iter(make_dataloader(FiberExamples(splits["validation"], False), batch_size=2, shuffle=False, seed=0)))
    assert raw["masked_caption"] == splits["validation"][:2]["masked_caption"] and "video_features" not in raw
    assert raw["index"].tolist() == [0, 1]


def assert_same_batches(loader, other, epochs=(0, 1)):
    for epoch in epochs:
        for sampler_owner in (loader, other):
            if hasattr(sampler_owner.sampler, "set_epoch"):
                sampler_owner.sampler.set_epoch(epoch)
        batches, other_batches = list(loader), list(other)
        assert len(batches) == len(other_batches)
        for batch, other_batch in zip(batches, other_batches):
            assert batch.keys() == other_batch.keys()
            for key in batch:
                assert torch.equal(batch[key], other_batch[key]), key


def test_workers_give_the_same_batches_as_the_training_process(splits, processor):
    examples = FiberExamples(splits["train"], True)
    settings = {"batch_size": 16, "shuffle": True, "seed": 3, "processor": processor}
    assert_same_batches(
        make_dataloader(examples, **settings), make_dataloader(examples, **settings, num_workers=2), epochs=(0,)
    )


def test_the_workers_of_a_pushing_process_start_while_a_push_holds_the_hub_clients_lock(splits, processor):
    # A push holds this lock for a moment in each request; huggingface_hub takes it in every forked child, where
    # it closes its client (`os.register_at_fork`): a worker forked then would wait for it forever.
    pool_lock = get_session()._transport._pool._optional_thread_lock
    held, pushed = threading.Event(), threading.Event()

    def push():
        with pool_lock:
            held.set()
            pushed.wait()

    threading.Thread(target=push, daemon=True).start()
    held.wait()
    examples = FiberExamples(splits["train"], True)
    settings = {"batch_size": 16, "shuffle": True, "seed": 3, "processor": processor}
    loader = make_dataloader(examples, **settings, num_workers=2, worker_context=forkserver_context())
    batches = []
    loading = threading.Thread(target=lambda: batches.extend(loader), daemon=True)
    try:
        loading.start()
        loading.join(timeout=120)
    finally:
        pushed.set()
    assert not loading.is_alive(), "the workers hang"
    expected = list(make_dataloader(examples, **settings))
    assert len(batches) == len(expected)
    assert all(torch.equal(batch[key], other[key]) for batch, other in zip(batches, expected) for key in batch)


def test_the_collator_and_examples_survive_pickling_for_spawned_workers(splits, processor):
    examples = FiberExamples(splits["validation"], True)
    collator = FiberDataCollator(processor)
    batch = collator(examples.__getitems__([0, 1, 2]))
    copied_examples, copied_collator = pickle.loads(pickle.dumps(examples)), pickle.loads(pickle.dumps(collator))
    copied = copied_collator(copied_examples.__getitems__([0, 1, 2]))
    assert all(torch.equal(batch[key], copied[key]) for key in batch)


def test_length_grouped_batches_pad_less_and_change_every_epoch(splits, processor):
    examples = FiberExamples(splits["train"], True)
    lengths = examples.lengths(processor)
    rows = splits["train"][:3]
    assert lengths[:3] == [
        len(processor(caption, video_features=[clip])["input_ids"][0]) + len(clip)
        for caption, clip in zip(rows["masked_caption"], rows["video_features"])
    ]
    sampler = LengthGroupedSampler(lengths, batch_size=8, seed=0)
    first = list(sampler)
    assert sorted(first) == list(range(len(examples))) and list(sampler) == first
    sampler.set_epoch(1)
    assert list(sampler) != first

    def padding(order):
        batches = [order[i : i + 8] for i in range(0, len(order), 8)]
        return sum(max(lengths[i] for i in batch) * len(batch) - sum(lengths[i] for i in batch) for batch in batches)

    random_order = torch.randperm(len(examples), generator=torch.Generator().manual_seed(0)).tolist()
    assert padding(first) < padding(random_order) / 2


def test_grouped_loaders_with_and_without_workers_agree(splits, processor):
    examples = FiberExamples(splits["train"], True)
    settings = {
        "batch_size": 16,
        "shuffle": True,
        "seed": 3,
        "processor": processor,
        "lengths": examples.lengths(processor),
    }
    assert_same_batches(make_dataloader(examples, **settings), make_dataloader(examples, **settings, num_workers=1))
