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
