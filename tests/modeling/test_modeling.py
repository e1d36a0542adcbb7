"""FiberT5ForConditionalGeneration: fusions train, batching changes nothing, "none" is T5, T5 starts, save/load."""

import json

import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM, T5Config, T5ForConditionalGeneration
from transformers.modeling_outputs import BaseModelOutput

from fiberbench.modeling import FUSIONS, FiberT5Config, FiberT5ForConditionalGeneration


def model_inputs(processor, clips, fusion, labels=True):
    """The processor's batch for `clips`, with video unless the model is text-only."""
    return processor(
        [clip["masked_caption"] for clip in clips],
        video_features=None if fusion == "none" else [clip["video"] for clip in clips],
        labels=[clip["label"] for clip in clips] if labels else None,
    )


@pytest.mark.parametrize("fusion", FUSIONS)
def test_forward_backward_reaches_every_weight(fusion, make_model, processor, sample_clips):
    model = make_model(fusion).train()
    batch = model_inputs(processor, sample_clips, fusion)
    output = model(**batch)
    assert output.logits.shape == (*batch["labels"].shape, model.config.vocab_size)
    assert torch.isfinite(output.loss)
    output.loss.backward()
    without_gradient = [
        name for name, parameter in model.named_parameters() if parameter.grad is None or not parameter.grad.any()
    ]
    assert without_gradient == []


@pytest.mark.parametrize("fusion", ["early", "late"])
def test_gradients_reach_the_video_projection_and_features(fusion, make_model, processor, sample_clips):
    model = make_model(fusion)
    batch = model_inputs(processor, sample_clips, fusion)
    batch["video_features"].requires_grad_(True)
    model(**batch).loss.backward()
    assert model.encoder.video_projection.weight.grad.abs().sum() > 0
    real_frames = batch["video_attention_mask"].bool()
    assert batch["video_features"].grad[real_frames].abs().sum(dim=-1).gt(0).all()
    assert not batch["video_features"].grad[~real_frames].any()


@pytest.mark.parametrize("fusion", ["early", "late"])
def test_forward_in_a_batch_equals_forward_alone(fusion, make_model, processor, sample_clips):
    model = make_model(fusion)
    logits = model(**model_inputs(processor, sample_clips, fusion)).logits
    for index, clip in enumerate(sample_clips):
        alone = model(**model_inputs(processor, [clip], fusion)).logits
        torch.testing.assert_close(logits[index : index + 1, : alone.shape[1]], alone, rtol=0, atol=1e-4)


@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("num_beams", [1, 4])
def test_generate_in_a_batch_equals_generate_alone(fusion, num_beams, make_model, processor, sample_clips):
    """Batch 3 with different caption and video lengths: each example gets what it gets alone."""
    model = make_model(fusion)
    settings = {"num_beams": num_beams, "num_return_sequences": num_beams}
    settings |= {"output_scores": True, "return_dict_in_generate": True}
    batched = model.generate(**model_inputs(processor, sample_clips, fusion, labels=False), **settings)
    for index, clip in enumerate(sample_clips):
        alone = model.generate(**model_inputs(processor, [clip], fusion, labels=False), **settings)
        rows = batched.sequences[index * num_beams : (index + 1) * num_beams]
        length = alone.sequences.shape[1]
        assert torch.equal(rows[:, :length], alone.sequences)
        assert torch.isin(rows[:, length:], torch.tensor([model.config.pad_token_id, model.config.eos_token_id])).all()
        if num_beams > 1:
            scores = batched.sequences_scores[index * num_beams : (index + 1) * num_beams]
            torch.testing.assert_close(scores, alone.sequences_scores, rtol=0, atol=1e-4)


def test_fusion_none_is_exactly_t5(make_model, processor, sample_clips):
    model = make_model("none")
    t5 = T5ForConditionalGeneration(T5Config(**model.config.to_diff_dict())).eval()
    t5.load_state_dict(model.state_dict())
    batch = model_inputs(processor, sample_clips, "none")
    ours, theirs = model(**batch), t5(**batch)
    assert torch.equal(ours.logits, theirs.logits)
    assert torch.equal(ours.loss, theirs.loss)
    del batch["labels"]
    settings = {"num_beams": 2, "max_new_tokens": 10, "no_repeat_ngram_size": 2}
    assert torch.equal(model.generate(**batch, **settings), t5.generate(**batch, **settings))


def test_video_inputs_must_match_the_fusion(make_model, processor, sample_clips):
    with pytest.raises(ValueError, match="needs video_features"):
        make_model("early")(**model_inputs(processor, sample_clips, "none"))
    with pytest.raises(ValueError, match="takes no video_features"):
        make_model("none")(**model_inputs(processor, sample_clips, "early"))


@pytest.fixture(params=["t5", "t5-v1_1"])
def t5_checkpoint(request, tmp_path, tokenizer):
    """A tiny plain T5 checkpoint (model_type "t5"), as `t5-base` or `google/t5-v1_1-base` would be on the Hub."""
    # Like t5-base's config.json: T5Config has no field for the decoder start, checkpoints carry it.
    sizes = {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 1, "num_heads": 4}
    if request.param == "t5-v1_1":
        sizes |= {"feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}
    config = T5Config(vocab_size=len(tokenizer), decoder_start_token_id=0, **sizes)
    torch.manual_seed(1)
    t5 = T5ForConditionalGeneration(config).eval()
    t5.save_pretrained(tmp_path / request.param)
    return tmp_path / request.param, t5


def test_start_from_a_t5_checkpoint(t5_checkpoint, caplog):
    folder, t5 = t5_checkpoint
    model = FiberT5ForConditionalGeneration.from_pretrained(folder, fusion="late")
    assert model.config.fusion == "late"
    ours = model.state_dict()
    for name, weight in t5.state_dict().items():
        assert torch.equal(ours[name], weight), name
    assert "encoder.video_projection (2 tensors)" in caplog.text
    assert "encoder.video_encoder" in caplog.text and "encoder.fusion_encoder" in caplog.text
    # LeCun-normal, not T5's std 1.0: std 1024 ** -0.5.
    assert 0.025 < model.encoder.video_projection.weight.std() < 0.038
    generation = model.generation_config
    assert (generation.num_beams, generation.max_new_tokens, generation.no_repeat_ngram_size) == (8, 10, 2)
    assert generation.early_stopping is True
    assert not hasattr(generation, "fusion")


def test_text_only_start_from_t5_gives_t5s_outputs(t5_checkpoint, processor, sample_clips):
    folder, t5 = t5_checkpoint
    model = FiberT5ForConditionalGeneration.from_pretrained(folder)
    batch = model_inputs(processor, sample_clips, "none")
    expected = T5ForConditionalGeneration.from_pretrained(folder)(**batch).logits
    assert torch.equal(model(**batch).logits, expected)
    assert torch.equal(expected, t5(**batch).logits)


def test_a_bad_fusion_fails_when_loading(t5_checkpoint):
    with pytest.raises(ValueError, match="`fusion` must be one of"):
        FiberT5ForConditionalGeneration.from_pretrained(t5_checkpoint[0], fusion="middle")


def test_save_and_load_by_registration(tmp_path, make_model, processor, sample_clips):
    model = make_model("early")
    model.save_pretrained(tmp_path)
    files = {path.name for path in tmp_path.iterdir()}
    assert "model.safetensors" in files
    assert not any(name.endswith((".bin", ".pt", ".pth", ".ckpt")) for name in files)
    assert {"configuration_fiber_t5.py", "modeling_fiber_t5.py", "decoding.py", "noun_phrases.py"} <= files
    auto_map = json.loads((tmp_path / "config.json").read_text())["auto_map"]
    assert auto_map["AutoModelForSeq2SeqLM"] == "modeling_fiber_t5.FiberT5ForConditionalGeneration"

    assert isinstance(AutoConfig.from_pretrained(tmp_path), FiberT5Config)
    batch = model_inputs(processor, sample_clips, "early")
    expected = model(**batch).logits
    for auto_class in (AutoModelForSeq2SeqLM, AutoModel):
        loaded = auto_class.from_pretrained(tmp_path)
        assert type(loaded) is FiberT5ForConditionalGeneration
        assert torch.equal(loaded(**batch).logits, expected)
        assert loaded.generation_config.num_beams == 4


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
@pytest.mark.parametrize("max_shard_size", [None, "20KB"])
def test_every_saved_file_has_the_mode_the_umask_gives(tmp_path, make_model, umask, mode, max_shard_size):
    """safetensors writes its files 0600 whatever the umask; a saved model is shared, so its weights are readable
    like its config."""
    import os

    model = make_model("early")
    old_umask = os.umask(umask)
    try:
        model.save_pretrained(tmp_path / "model", **({"max_shard_size": max_shard_size} if max_shard_size else {}))
    finally:
        os.umask(old_umask)
    modes = {path.name: path.stat().st_mode & 0o777 for path in (tmp_path / "model").iterdir()}
    assert any(name.endswith(".safetensors") for name in modes)
    assert modes == dict.fromkeys(modes, mode)


def test_encoder_outputs_without_the_joint_mask_are_refused(make_model):
    model = make_model("early")
    hidden = torch.zeros(1, 3, model.config.d_model)
    with pytest.raises(ValueError, match="FiberT5EncoderOutput"):
        model(encoder_outputs=BaseModelOutput(last_hidden_state=hidden), decoder_input_ids=torch.zeros(1, 1, dtype=torch.long))
