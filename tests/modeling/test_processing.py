"""FiberProcessor: blank and target format, video padding, single-feature mode, saving, reading answers."""

import numpy as np
import torch
from transformers import AutoProcessor

from fiberbench.modeling import FiberProcessor


def test_blank_becomes_the_first_sentinel_and_labels_the_sentinel_target(processor, tokenizer):
    batch = processor(["A man plays _____ on a stage.", "_____ smiles."])
    expected = [tokenizer(text).input_ids for text in ("A man plays <extra_id_0> on a stage.", "<extra_id_0> smiles.")]
    assert batch["input_ids"][0].tolist() == expected[0] and batch["input_ids"][1, 0] == processor.blank_token_id
    assert batch["input_ids"][1, : len(expected[1])].tolist() == expected[1]
    assert batch["attention_mask"].sum(dim=1).tolist() == [len(ids) for ids in expected]
    assert "video_features" not in batch and "labels" not in batch
    labels = ["a park", "a very tall police officer"]
    for row, label in zip(processor(["A _____.", "B _____."], labels=labels)["labels"], labels):
        target = tokenizer(f"<extra_id_0> {label} <extra_id_1>").input_ids
        assert row[: len(target)].tolist() == target and (row[len(target) :] == -100).all()
    assert target[-1] == tokenizer.eos_token_id


def test_video_features_are_padded_with_a_mask_read_only_ones_too(processor, recwarn):
    short, long = np.ones((1, 2, 1024), dtype=np.float32), np.full((5, 1024), 2.0, dtype=np.float32)
    long.flags.writeable = False  # as `with_format("numpy")` gives them, from Arrow's buffers
    batch = processor(["A _____.", "B _____."], video_features=[short, long])
    assert batch["video_features"].shape == (2, 5, 1024) and batch["video_features"].dtype == torch.float32
    assert batch["video_attention_mask"].tolist() == [[1, 1, 0, 0, 0], [1, 1, 1, 1, 1]]
    assert (batch["video_features"][0, 2:] == 0).all() and (batch["video_features"][1] == 2).all()
    assert not [warning for warning in recwarn if "not writable" in str(warning.message)]


def test_single_feature_mode_keeps_the_feature_at_the_given_second(tokenizer):
    single = FiberProcessor(tokenizer, single_feature=True)
    assert single.feature_index == 9  # 3 s at 25 fps = frame 75, in the feature of frames 72-79
    clip = np.arange(32, dtype=np.float32)[:, None].repeat(1024, axis=1)
    batch = single(["A _____.", "B _____."], video_features=[clip, clip[:4]])
    assert batch["video_features"].shape == (2, 1, 1024) and batch["video_attention_mask"].tolist() == [[1], [1]]
    assert batch["video_features"][:, 0, 0].tolist() == [9.0, 3.0]  # a clip shorter than 3 s keeps its last
    assert FiberProcessor(tokenizer, single_feature=True, feature_second=0.5).feature_index == 1


def test_save_and_load(tmp_path, tokenizer):
    single = FiberProcessor(tokenizer, single_feature=True, feature_second=2.0)
    single.save_pretrained(tmp_path)
    clip = [np.random.default_rng(0).normal(size=(20, 1024))]
    expected = single(["A man plays _____."], video_features=clip, labels=["a guitar"])
    for loaded in (FiberProcessor.from_pretrained(tmp_path), AutoProcessor.from_pretrained(tmp_path)):
        assert type(loaded) is FiberProcessor and (loaded.single_feature, loaded.feature_second) == (True, 2.0)
        batch = loaded(["A man plays _____."], video_features=clip, labels=["a guitar"])
        assert batch.keys() == expected.keys() and all(torch.equal(batch[key], expected[key]) for key in batch)


def test_decode_answers(processor, tokenizer):
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    opening, closing = processor.blank_token_id, processor.answer_end_token_id
    park = tokenizer("a park", add_special_tokens=False).input_ids
    sequences = [
        [pad, opening, *park, closing, eos, eos],  # the target format, padded by beam search with </s>
        [pad, opening, *park, eos, pad, pad],  # no <extra_id_1>: the answer runs to </s>
        [pad, *park, closing, eos, pad, pad],  # no <extra_id_0>: the answer starts at the beginning
        [pad, opening, *park, eos, closing, park[0]],  # cut at the first </s>
        [pad, opening, closing, eos, pad, pad],  # an empty answer
    ]
    width = max(map(len, sequences))
    padded = torch.tensor([row + [pad] * (width - len(row)) for row in sequences])
    assert processor.decode_answers(padded) == ["a park", "a park", "a park", "a park", ""]
