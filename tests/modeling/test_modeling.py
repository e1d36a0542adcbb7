"""FiberT5ForConditionalGeneration and its config: fusions train, batching changes nothing, "none" is T5, T5 checkpoints
start it, save/load by registration, file modes; the config's fields and checks."""

import json
import os

import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM, T5Config, T5ForConditionalGeneration

from fiberbench.modeling import FUSIONS, FiberT5Config, FiberT5ForConditionalGeneration, build_tiny_config


def model_inputs(processor, clips, fusion, labels=True):
    """The processor's batch for `clips`, with video unless the model is text-only."""
    return processor([clip["masked_caption"] for clip in clips],
                     video_features=None if fusion == "none" else [clip["video"] for clip in clips],
                     labels=[clip["label"] for clip in clips] if labels else None)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_forward_backward_reaches_every_weight_and_only_real_frames(fusion, make_model, processor, sample_clips):
    model = make_model(fusion).train()
    batch = model_inputs(processor, sample_clips, fusion)
    if fusion != "none":
        batch["video_features"].requires_grad_(True)
    output = model(**batch)
    assert output.logits.shape == (*batch["labels"].shape, model.config.vocab_size) and torch.isfinite(output.loss)
    output.loss.backward()
    assert [name for name, weight in model.named_parameters() if weight.grad is None or not weight.grad.any()] == []
    if fusion != "none":
        real = batch["video_attention_mask"].bool()
        assert batch["video_features"].grad[real].abs().sum(dim=-1).gt(0).all()
        assert not batch["video_features"].grad[~real].any()


@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("num_beams", [1, 4])
def test_forward_and_generate_in_a_batch_equal_them_alone(fusion, num_beams, make_model, processor, sample_clips):
    """Batch 3 with different caption and video lengths: each example gets what it gets alone."""
    model = make_model(fusion)
    logits = model(**model_inputs(processor, sample_clips, fusion)).logits
    settings = {"num_beams": num_beams, "num_return_sequences": num_beams, "output_scores": True,
                "return_dict_in_generate": True}
    batched = model.generate(**model_inputs(processor, sample_clips, fusion, labels=False), **settings)
    for index, clip in enumerate(sample_clips):
        alone = model(**model_inputs(processor, [clip], fusion)).logits
        torch.testing.assert_close(logits[index : index + 1, : alone.shape[1]], alone, rtol=0, atol=1e-4)
        generated = model.generate(**model_inputs(processor, [clip], fusion, labels=False), **settings)
        rows, length = batched.sequences[index * num_beams : (index + 1) * num_beams], generated.sequences.shape[1]
        assert torch.equal(rows[:, :length], generated.sequences)
        assert torch.isin(rows[:, length:], torch.tensor([model.config.pad_token_id, model.config.eos_token_id])).all()
        if num_beams > 1:
            scores = batched.sequences_scores[index * num_beams : (index + 1) * num_beams]
            torch.testing.assert_close(scores, generated.sequences_scores, rtol=0, atol=1e-4)


def test_fusion_none_is_exactly_t5(make_model, processor, sample_clips):
    model = make_model("none")
    t5 = T5ForConditionalGeneration(T5Config(**model.config.to_diff_dict())).eval()
    t5.load_state_dict(model.state_dict())
    batch = model_inputs(processor, sample_clips, "none")
    ours, theirs = model(**batch), t5(**batch)
    assert torch.equal(ours.logits, theirs.logits) and torch.equal(ours.loss, theirs.loss)
    del batch["labels"]
    settings = {"num_beams": 2, "max_new_tokens": 10, "no_repeat_ngram_size": 2}
    assert torch.equal(model.generate(**batch, **settings), t5.generate(**batch, **settings))


@pytest.fixture(params=["t5", "t5-v1_1"])
def t5_checkpoint(request, tmp_path, tokenizer):
    """A tiny plain T5 checkpoint (model_type "t5"), as `t5-base` or `google/t5-v1_1-base` would be on the Hub."""
    # Like t5-base's config.json: T5Config has no field for the decoder start, checkpoints carry it.
    sizes = {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 1, "num_heads": 4}
    if request.param == "t5-v1_1":
        sizes |= {"feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}
    torch.manual_seed(1)
    t5 = T5ForConditionalGeneration(T5Config(vocab_size=len(tokenizer), decoder_start_token_id=0, **sizes)).eval()
    t5.save_pretrained(tmp_path / request.param)
    return tmp_path / request.param, t5


def test_start_from_a_t5_checkpoint(t5_checkpoint, processor, sample_clips, caplog):
    folder, t5 = t5_checkpoint
    model = FiberT5ForConditionalGeneration.from_pretrained(folder, fusion="late")
    assert model.config.fusion == "late"
    assert all(torch.equal(model.state_dict()[name], weight) for name, weight in t5.state_dict().items())
    assert "encoder.video_projection (2 tensors)" in caplog.text
    assert "encoder.video_encoder" in caplog.text and "encoder.fusion_encoder" in caplog.text
    assert 0.025 < model.encoder.video_projection.weight.std() < 0.038  # LeCun-normal, not T5's std 1.0
    generation = model.generation_config
    assert (generation.num_beams, generation.max_new_tokens, generation.no_repeat_ngram_size) == (8, 10, 2)
    assert generation.early_stopping is True and not hasattr(generation, "fusion")
    batch = model_inputs(processor, sample_clips, "none")  # text only from T5 is T5
    assert torch.equal(FiberT5ForConditionalGeneration.from_pretrained(folder)(**batch).logits, t5(**batch).logits)
    with pytest.raises(ValueError, match="`fusion` must be one of"):
        FiberT5ForConditionalGeneration.from_pretrained(folder, fusion="middle")


def test_save_and_load_by_registration(tmp_path, make_model, processor, sample_clips):
    make_model("early").save_pretrained(tmp_path)
    files = {path.name for path in tmp_path.iterdir()}
    assert "model.safetensors" in files and not any(name.endswith((".bin", ".pt", ".pth", ".ckpt")) for name in files)
    assert {"configuration_fiber_t5.py", "modeling_fiber_t5.py", "decoding.py", "noun_phrases.py"} <= files
    auto_map = json.loads((tmp_path / "config.json").read_text())["auto_map"]
    assert auto_map["AutoModelForSeq2SeqLM"] == "modeling_fiber_t5.FiberT5ForConditionalGeneration"
    assert auto_map["AutoConfig"] == "configuration_fiber_t5.FiberT5Config"
    assert isinstance(AutoConfig.from_pretrained(tmp_path), FiberT5Config)
    batch = model_inputs(processor, sample_clips, "early")
    for auto_class in (AutoModelForSeq2SeqLM, AutoModel):
        loaded = auto_class.from_pretrained(tmp_path)
        assert type(loaded) is FiberT5ForConditionalGeneration and loaded.generation_config.num_beams == 4
        assert torch.equal(loaded(**batch).logits, make_model("early")(**batch).logits)


@pytest.mark.parametrize("umask, mode, shards", [(0o022, 0o644, None), (0o077, 0o600, None), (0o002, 0o664, "20KB")])
def test_every_saved_file_has_the_mode_the_umask_gives(tmp_path, make_model, umask, mode, shards):
    """safetensors writes its files 0600 whatever the umask; a shared model's weights are readable like its config."""
    model, old_umask = make_model("early"), os.umask(umask)
    try:
        model.save_pretrained(tmp_path / "model", **({"max_shard_size": shards} if shards else {}))
    finally:
        os.umask(old_umask)
    modes = {path.name: path.stat().st_mode & 0o777 for path in (tmp_path / "model").iterdir()}
    assert any(name.endswith(".safetensors") for name in modes) and modes == dict.fromkeys(modes, mode)


def test_config_defaults_and_t5_configs(tmp_path, tokenizer):
    config = FiberT5Config()
    assert (config.model_type, config.fusion, config.video_feature_size, config.video_features_name) == (
        "fiber_t5", "none", 1024, "i3d")
    assert (config.num_video_layers, config.num_fusion_layers, config.decoder_start_token_id) == (1, 1, 0)
    T5Config(d_model=64, num_layers=2, feed_forward_proj="gated-gelu").save_pretrained(tmp_path)
    config = FiberT5Config.from_pretrained(tmp_path, fusion="early", num_video_layers=3)
    assert (config.model_type, config.d_model, config.num_layers, config.is_gated_act) == ("fiber_t5", 64, 2, True)
    assert (config.fusion, config.num_video_layers) == ("early", 3)
    tiny = build_tiny_config(tokenizer, "late", d_model=64, num_fusion_layers=2)
    assert (tiny.vocab_size, tiny.pad_token_id, tiny.eos_token_id, tiny.d_model) == (len(tokenizer), 0, 1, 64)
    tiny.save_pretrained(tmp_path / "tiny")
    assert FiberT5Config.from_pretrained(tmp_path / "tiny").to_dict() == tiny.to_dict()
