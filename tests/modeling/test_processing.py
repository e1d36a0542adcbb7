"""FiberProcessor: blank and target format, video padding, single-feature mode, errors, saving, answers."""

import numpy as np
import pytest
import torch
from transformers import AutoProcessor

from fiberbench.modeling import FiberProcessor


def test_blank_becomes_the_first_sentinel(processor, tokenizer):
    batch = processor(["A man plays _____ on a stage.", "_____ smiles."])
    expected = [tokenizer(text).input_ids for text in ("A man plays <extra_id_0> on a stage.", "<extra_id_0> smiles.")]
    assert batch["input_ids"][0].tolist() == expected[0]
    assert batch["input_ids"][1, : len(expected[1])].tolist() == expected[1]
    assert batch["input_ids"][1, 0] == processor.blank_token_id
    assert batch["attention_mask"].sum(dim=1).tolist() == [len(ids) for ids in expected]
    assert "video_features" not in batch and "labels" not in batch


def test_labels_are_sentinel_targets_padded_with_minus_100(processor, tokenizer):
    labels = ["a park", "a very tall police officer"]
    batch = processor(["A _____.", "B _____."], labels=labels)
    for row, label in zip(batch["labels"], labels):
        target = tokenizer(f"<extra_id_0> {label} <extra_id_1>").input_ids
        assert row[: len(target)].tolist() == target
        assert (row[len(target) :] == -100).all()
    assert target[-1] == tokenizer.eos_token_id


def test_video_features_are_padded_with_a_mask(processor):
    short, long = np.ones((1, 2, 1024), dtype=np.float32), np.full((5, 1024), 2.0, dtype=np.float32)
    batch = processor(["A _____.", "B _____."], video_features=[short, long])
    assert batch["video_features"].shape == (2, 5, 1024)
    assert batch["video_features"].dtype == torch.float32
    assert batch["video_attention_mask"].tolist() == [[1, 1, 0, 0, 0], [1, 1, 1, 1, 1]]
    assert (batch["video_features"][0, 2:] == 0).all() and (batch["video_features"][1] == 2).all()


def test_read_only_features_are_taken_without_torchs_warning(processor, recwarn):
    clip = np.full((3, 1024), 0.5, dtype=np.float32)
    clip.flags.writeable = False  # as `with_format("numpy")` gives them, from Arrow's buffers
    batch = processor(["A _____."], video_features=[clip])
    assert (batch["video_features"] == 0.5).all()
    assert not [warning for warning in recwarn if "not writable" in str(warning.message)]


def test_single_feature_mode_keeps_the_feature_at_the_given_second(tokenizer):
    single = FiberProcessor(tokenizer, single_feature=True)
    assert single.feature_index == 9  # 3 s at 25 fps = frame 75, in the feature of frames 72-79
    clip = np.arange(32, dtype=np.float32)[:, None].repeat(1024, axis=1)
    short = clip[:4]
    batch = single(["A _____.", "B _____."], video_features=[clip, short])
    assert batch["video_features"].shape == (2, 1, 1024)
    assert batch["video_features"][:, 0, 0].tolist() == [9.0, 3.0]  # a clip shorter than 3 s keeps its last
    assert batch["video_attention_mask"].tolist() == [[1], [1]]
    assert FiberProcessor(tokenizer, single_feature=True, feature_second=0.5).feature_index == 1


@pytest.mark.parametrize("single_feature", [False, True])
def test_a_non_finite_value_anywhere_in_a_clip_names_that_clip(tokenizer, single_feature):
    clips = [np.zeros((32, 1024), np.float32) for _ in range(3)]
    clips[2][30, 7] = np.inf  # past the single feature's frame: every frame is checked all the same
    processor = FiberProcessor(tokenizer, single_feature=single_feature)
    with pytest.raises(ValueError, match="Video features 2 hold NaN or infinite values"):
        processor(["A _____."] * 3, video_features=clips)


@pytest.mark.parametrize("caption", ["A man plays the guitar.", "_____ plays _____."])
def test_a_caption_without_exactly_one_blank_is_named(processor, caption):
    with pytest.raises(ValueError, match=r"Masked caption 1 must contain exactly one '_____'") as error:
        processor(["A man plays _____.", caption])
    assert caption in str(error.value)


def test_mismatched_or_malformed_inputs_fail(processor, tokenizer):
    with pytest.raises(ValueError, match="2 masked captions but 1 labels"):
        processor(["A _____.", "B _____."], labels=["x"])
    with pytest.raises(ValueError, match="2 masked captions but 1 video feature arrays"):
        processor(["A _____.", "B _____."], video_features=[np.zeros((3, 1024))])
    with pytest.raises(ValueError, match=r"Video features 0 must be shaped .* got \(2, 3, 1024\)"):
        processor(["A _____."], video_features=[np.zeros((2, 3, 1024))])
    with pytest.raises(ValueError, match="feature_second"):
        FiberProcessor(tokenizer, feature_second=-1.0)


def test_save_and_load(tmp_path, tokenizer):
    single = FiberProcessor(tokenizer, single_feature=True, feature_second=2.0)
    single.save_pretrained(tmp_path)
    clip = [np.random.default_rng(0).normal(size=(20, 1024))]
    expected = single(["A man plays _____."], video_features=clip, labels=["a guitar"])
    for loaded in (FiberProcessor.from_pretrained(tmp_path), AutoProcessor.from_pretrained(tmp_path)):
        assert type(loaded) is FiberProcessor
        assert (loaded.single_feature, loaded.feature_second) == (True, 2.0)
        batch = loaded(["A man plays _____."], video_features=clip, labels=["a guitar"])
        assert batch.keys() == expected.keys()
        assert all(torch.equal(batch[key], expected[key]) for key in batch)


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
