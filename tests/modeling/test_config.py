"""FiberT5Config: its fields, validation at construction, T5 configs read as FIBER ones, saving."""

import json

import pytest
from transformers import T5Config

from fiberbench.modeling import FiberT5Config, build_tiny_config


def test_defaults_are_text_only_t5_base_sized():
    config = FiberT5Config()
    assert (config.model_type, config.fusion, config.video_feature_size) == ("fiber_t5", "none", 1024)
    assert config.video_features_name == "i3d"
    assert (config.num_video_layers, config.num_fusion_layers, config.decoder_start_token_id) == (1, 1, 0)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("fusion", "middle", "`fusion` must be one of"),
        ("video_feature_size", 0, "`video_feature_size` must be a positive integer"),
        ("num_video_layers", 0, "`num_video_layers` must be a positive integer"),
        ("num_fusion_layers", -1, "`num_fusion_layers` must be a positive integer"),
        ("video_features_name", "", "`video_features_name` must name the dataset config of the features"),
    ],
)
def test_invalid_values_raise_at_construction(field, value, message):
    with pytest.raises(ValueError, match=message):
        FiberT5Config(**{field: value})


def test_a_t5_config_reads_as_a_fiber_config(tmp_path):
    T5Config(d_model=64, num_layers=2, feed_forward_proj="gated-gelu").save_pretrained(tmp_path)
    config = FiberT5Config.from_pretrained(tmp_path, fusion="early", num_video_layers=3)
    assert (config.model_type, config.d_model, config.num_layers, config.is_gated_act) == ("fiber_t5", 64, 2, True)
    assert (config.fusion, config.num_video_layers) == ("early", 3)


def test_save_and_load(tmp_path, tokenizer):
    config = build_tiny_config(tokenizer, "late", num_fusion_layers=2)
    config.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == "fiber_t5"
    assert saved["auto_map"]["AutoConfig"] == "configuration_fiber_t5.FiberT5Config"
    loaded = FiberT5Config.from_pretrained(tmp_path)
    assert loaded.to_dict() == config.to_dict()


def test_tiny_config_follows_the_tokenizer(tokenizer):
    config = build_tiny_config(tokenizer, "early", d_model=64)
    assert (config.vocab_size, config.pad_token_id, config.eos_token_id) == (len(tokenizer), 0, 1)
    assert (config.fusion, config.d_model, config.num_layers, config.num_decoder_layers) == ("early", 64, 1, 1)
