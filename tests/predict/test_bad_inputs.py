"""Bad inputs to `fiberbench predict`: one line each, the right exit status, before any work, nothing written."""

import json
import os
import re
import subprocess
import sys

import pytest
import torch
from tokenizers import Tokenizer, models
from transformers import (
    PreTrainedTokenizerFast,
    T5Config,
    T5ForConditionalGeneration,
    ViTConfig,
    ViTModel,
)

from fiberbench.predict.command import clip_keys

from .conftest import sample_test_records, save_fiber

USAGE, DATA = 2, 1


def pickle_only_model(tmp_path, tiny_models):
    """A FIBER model folder whose weights are only a pickle (pytorch_model.bin)."""
    folder = tmp_path / "pickled"
    save_fiber(folder)
    from safetensors.torch import load_file

    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    return ["--model_name_or_path", folder]


def vision_only_model(tmp_path, tiny_models):
    """A model of no kind predict runs: an image encoder."""
    folder = tmp_path / "vit"
    ViTModel(ViTConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8)).save_pretrained(
        folder
    )
    return ["--model_name_or_path", folder]


def seq2seq_without_sentinels(tmp_path, tiny_models):
    """A T5 model whose tokenizer has no <extra_id_0>: the paper's format cannot be written."""
    folder = tmp_path / "no_sentinels"
    words = Tokenizer(models.WordLevel(vocab={"<pad>": 0, "</s>": 1, "<unk>": 2, "a": 3}, unk_token="<unk>"))
    PreTrainedTokenizerFast(
        tokenizer_object=words, unk_token="<unk>", pad_token="<pad>", eos_token="</s>"
    ).save_pretrained(folder)
    T5ForConditionalGeneration(
        T5Config(vocab_size=4, d_model=8, d_kv=4, d_ff=8, num_layers=1, num_heads=2)
    ).save_pretrained(folder)
    return ["--model_name_or_path", folder]


def foreign_output(tmp_path, tiny_models):
    (tmp_path / "predictions.jsonl").write_text("my own notes\n")
    return ["--model_name_or_path", tiny_models["causal"]]


def output_of_other_settings(tmp_path, tiny_models):
    from fiberbench.cli import main

    flags = ["--model_name_or_path", tiny_models["causal"], "--output_file", tmp_path / "predictions.jsonl"]
    assert main(["predict", *map(str, flags), "--max_predict_samples", "2"]) == 0
    return [
        "--model_name_or_path",
        tiny_models["causal"],
        "--max_predict_samples",
        "2",
        "--num_beams",
        "3",
        "--no_only_noun_phrases",
    ]


def missing_video(tmp_path, tiny_models):
    (tmp_path / "videos").mkdir()
    return ["--model_name_or_path", tiny_models["video"], "--video_dir", tmp_path / "videos"]


def model(kind, *flags):
    return lambda tmp_path, tiny_models: ["--model_name_or_path", tiny_models[kind], *flags]


FIRST = sample_test_records()[0]
# id -> (the flags, made in the test's folder; the exit status; the pattern of the one line)
CASES = {
    "a model folder that does not exist": (
        lambda tmp_path, tiny_models: ["--model_name_or_path", "./no/such/model"],
        USAGE,
        "--model_name_or_path ./no/such/model: no such folder",
    ),
    "a model of no supported kind": (vision_only_model, USAGE, "model type 'vit' is none of the kinds"),
    "a video model without --video_dir": (model("video"), USAGE, "is a video-language model: give --video_dir"),
    "a template without {masked_caption}": (
        model("causal", "--prompt", "Fill the blank."),
        USAGE,
        "--prompt must contain {masked_caption}",
    ),
    "a template with another field": (
        model("causal", "--prompt", "{masked_caption} {label}"),
        USAGE,
        "--prompt may only use {masked_caption}, got {label}",
    ),
    "a template with a lone brace": (
        model("causal", "--prompt", "{masked_caption} }"),
        USAGE,
        "--prompt is not a valid template",
    ),
    "--prompt for a seq2seq model": (
        model("seq2seq", "--prompt", "{masked_caption}"),
        USAGE,
        "--prompt is for causal and video-language models; a seq2seq LM uses the paper's",
    ),
    "--video_dir for a causal model": (
        lambda tmp_path, tiny_models: ["--model_name_or_path", tiny_models["causal"], "--video_dir", tmp_path],
        USAGE,
        "--video_dir is for video-language models; a causal LM does not read",
    ),
    "--num_beams 0": (model("causal", "--num_beams", "0"), USAGE, "--num_beams must be at least 1, got 0"),
    "--per_device_eval_batch_size 0": (
        model("causal", "--per_device_eval_batch_size", "0"),
        USAGE,
        "--per_device_eval_batch_size must be at least 1, got 0",
    ),
    "--max_predict_samples -1": (
        model("causal", "--max_predict_samples", "-1"),
        USAGE,
        "--max_predict_samples must be at least 1, got -1",
    ),
    "a --video_dir that does not exist": (
        model("video", "--video_dir", "/no/such/videos"),
        USAGE,
        "--video_dir /no/such/videos: no such folder",
    ),
    "an output inside the model folder": (
        lambda tmp_path, tiny_models: [
            "--model_name_or_path",
            tiny_models["causal"],
            "--output_file",
            tiny_models["causal"] / "predictions.jsonl",
        ],
        USAGE,
        "lies inside the input folder",
    ),
    "an output that is a folder": (
        lambda tmp_path, tiny_models: ["--model_name_or_path", tiny_models["causal"], "--output_file", tmp_path],
        USAGE,
        "is a folder; give a file name",
    ),
    "an output this command did not write": (foreign_output, USAGE, "exists and was not written by fiberbench predict"),
    "an output made with other settings": (
        output_of_other_settings,
        USAGE,
        r"holds predictions made with other settings \(decoding.num_beams: 3 here, 1 there",
    ),
    "a clip without a video": (
        missing_video,
        DATA,
        f"no video for clip {FIRST['video_id']} .*looked for {FIRST['video_id']}_",
    ),
    "an unknown split": (
        model("causal", "--split", "dev"),
        DATA,
        "has no split 'dev' \\(splits: train, validation, test\\)",
    ),
    "a dataset that does not exist": (
        lambda tmp_path, tiny_models: [
            "--model_name_or_path",
            tiny_models["causal"],
            "--dataset_name",
            tmp_path / "no_such_dataset",
        ],
        DATA,
        "--dataset_name .*no_such_dataset: cannot load its 'text' config",
    ),
    "a seq2seq tokenizer without sentinels": (
        seq2seq_without_sentinels,
        USAGE,
        "the paper's zero-shot format needs T5's sentinel tokens",
    ),
    "a model folder with only a pickle": (pickle_only_model, DATA, "no file named model.safetensors"),
    "a causal LM run as a FIBER model": (
        model("causal", "--model_type", "fiber"),
        USAGE,
        "--model_type fiber runs FIBER and T5 checkpoints; .* is a 'llama' model",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_refused_in_one_line(case, tiny_models, tmp_path, cli_error):
    make_flags, status, pattern = CASES[case]
    flags = [str(flag) for flag in make_flags(tmp_path, tiny_models)]
    if "--output_file" not in flags:
        flags += ["--output_file", str(tmp_path / "predictions.jsonl")]
    before = sorted((path.name, path.stat().st_size) for path in tmp_path.rglob("*"))
    exit_status, line = cli_error("predict", *flags)
    assert exit_status == status, line
    assert line.startswith("fiberbench predict: error: ")
    assert re.search(pattern, line), line
    assert sorted((path.name, path.stat().st_size) for path in tmp_path.rglob("*")) == before, "something was written"


def test_an_unreachable_model_id_offline_is_one_line_at_once(tmp_path):
    """With HF_HUB_OFFLINE=1 (set before the libraries start, as users do), no network wait."""
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "fiberbench.cli",
            "predict",
            "--model_name_or_path",
            "org/not-a-model",
            "--output_file",
            tmp_path / "predictions.jsonl",
        ],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == USAGE
    assert result.stderr.strip().splitlines() == [
        "fiberbench predict: error: --model_name_or_path org/not-a-model: not a local model folder, and not loadable "
        "from the Hub (HF_HUB_OFFLINE is set and it is not in the cache)"
    ]
    assert not (tmp_path / "predictions.jsonl").exists()


def test_a_clip_twice_in_the_split_is_refused():
    from datasets import Dataset

    rows = [{"video_id": "abc", "video_start_time": 1, "video_end_time": 11}] * 2
    with pytest.raises(ValueError, match=r"data.json, split test: rows 0 and 1 are the same clip \('abc', 1, 11\)"):
        clip_keys(Dataset.from_list(rows), "data.json, split test")
    assert json.dumps(clip_keys(Dataset.from_list(rows[:1]), "x")) == '[["abc", 1, 11]]'
