"""The model a run loads (checked first: safetensors only, no waiting on an unreachable Hub) and the baseline."""

import pytest
from safetensors.torch import save_model
from transformers import AutoTokenizer

from fiberbench.errors import DataError
from fiberbench.metric.baselines import most_frequent_answer
from fiberbench.modeling import SAMPLE_TOKENIZER_PATH, FiberT5ForConditionalGeneration, build_tiny_config
from fiberbench.training.models import loading_options


def test_most_frequent_answer_counts_normalized_labels():
    labels = ["A man", "a woman", "the man", "a man.", "a woman", "Woman"]
    assert most_frequent_answer(labels) in {"A man", "the man", "a man."}
    assert most_frequent_answer(["a dog", "a cat", "a dog", "A cat"]) == "a dog"  # tie: first form seen
    assert most_frequent_answer(["the Man", "a man", "a man"]) == "a man"  # its most common spelling
    with pytest.raises(DataError, match="non-empty"):
        most_frequent_answer([])


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("model") / "tiny"
    model = FiberT5ForConditionalGeneration(build_tiny_config(AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH)))
    model.save_pretrained(folder)
    return folder


def test_a_saved_model_folder_loads_with_safetensors_only(saved_model):
    assert loading_options(str(saved_model)) == {"use_safetensors": True}


def test_a_folder_with_only_pickled_weights_is_refused(saved_model, tmp_path):
    folder = tmp_path / "pickled"
    folder.mkdir()
    (folder / "config.json").write_bytes((saved_model / "config.json").read_bytes())
    (folder / "pytorch_model.bin").write_bytes(b"not unpickled")
    with pytest.raises(DataError, match="no model.safetensors in the folder \\(found: pytorch_model.bin\\)"):
        loading_options(str(folder))
    save_model(FiberT5ForConditionalGeneration.from_pretrained(saved_model), str(folder / "model.safetensors"))
    assert loading_options(str(folder)) == {"use_safetensors": True}


def test_a_folder_without_a_config_is_not_a_model(tmp_path):
    with pytest.raises(DataError, match="no config.json"):
        loading_options(str(tmp_path))


def test_a_missing_folder_is_named(tmp_path):
    with pytest.raises(DataError, match="no such folder"):
        loading_options(str(tmp_path / "no" / "such" / "model"))


def test_an_uncached_hub_model_offline_fails_at_once_with_the_ways_out(monkeypatch, tmp_path):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(DataError) as error:
        loading_options("fiber-org/no-such-model")
    message = str(error.value)
    assert "not in the Hugging Face cache" in message and "HF_HUB_OFFLINE is set" in message
    assert "hf download fiber-org/no-such-model" in message and "local model folder" in message


def saved_fiber(folder, fusion: str, **fields):
    config = build_tiny_config(AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH), fusion)
    config.update(fields)
    FiberT5ForConditionalGeneration(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH).save_pretrained(folder)
    return str(folder)


def test_the_video_features_size_and_config_come_from_the_data(tmp_path):
    from fiberbench.training.arguments import parse_args
    from fiberbench.training.models import VideoFeatures, build_model

    clip = VideoFeatures("clip-vit-base-patch32", 48)
    model, _ = build_model(parse_args(["--fusion", "early"]), "early", {}, clip)  # the tiny model
    assert (model.config.video_feature_size, model.config.video_features_name) == (48, "clip-vit-base-patch32")
    assert model.get_encoder().video_projection.weight.shape[1] == 48
    # A text-only FIBER checkpoint has no video weights yet: they are made for the data.
    text_only = saved_fiber(tmp_path / "text_only", "none")
    options = loading_options(text_only)
    model, _ = build_model(parse_args(["--model_name_or_path", text_only, "--fusion", "early"]), "early", options, clip)
    assert (model.config.video_feature_size, model.config.video_features_name) == (48, "clip-vit-base-patch32")


def test_a_checkpoint_of_features_of_another_size_is_one_line(tmp_path, caplog):
    from fiberbench.training.arguments import parse_args
    from fiberbench.training.inputs import default_config_name
    from fiberbench.training.models import VideoFeatures, build_model, checkpoint_config

    i3d = saved_fiber(tmp_path / "i3d", "early")
    args = parse_args(["--model_name_or_path", i3d])
    options = loading_options(i3d)
    with pytest.raises(DataError) as error:
        build_model(args, "early", options, VideoFeatures("clip", 48))
    assert str(error.value) == (
        f"--model_name_or_path {i3d} reads video features of size 1024 (its 'i3d' features), but the dataset's 'clip' "
        "config has features of size 48: give the config of the features it was trained on, or start from a T5 or "
        "text-only checkpoint"
    )
    model, _ = build_model(args, "early", options, VideoFeatures("dinov2-large", 1024))  # same size, other features
    assert model.config.video_features_name == "dinov2-large" and "trained on the 'i3d' features" in caplog.text
    # Without --dataset_config_name, a checkpoint reads the features it was trained on.
    clip = saved_fiber(tmp_path / "clip", "late", video_feature_size=48, video_features_name="clip")
    checkpoint = checkpoint_config(parse_args(["--model_name_or_path", clip]), loading_options(clip))
    assert default_config_name("late", checkpoint.video_features_name) == "clip"
    assert default_config_name("early") == "i3d" and default_config_name("none", "clip") == "text"
