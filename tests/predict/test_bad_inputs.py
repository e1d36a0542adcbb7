"""Bad inputs to `fiberbench predict`: one line each, the right exit status, before any work, nothing written."""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fiberbench.records import clip_id
from tokenizers import Tokenizer, models
from transformers import (
    PreTrainedTokenizerFast,
    T5Config,
    T5ForConditionalGeneration,
    ViTConfig,
    ViTModel,
)

from fiberbench.predict.clips import clip_keys
from fiberbench.testing.tiny_models import save_fiber

from .conftest import (
    FINISHED_RUNS,
    copy_finished_run,
    refused,
    sample_test_records,
    write_video,
    write_video_claiming,
    write_zero_duration_video,
)

USAGE, DATA = 2, 1


def pickle_only_model(tmp_path, tiny_models):
    """A FIBER model folder whose weights are only a pickle (pytorch_model.bin)."""
    folder = tmp_path / "pickled"
    save_fiber(folder)
    from safetensors.torch import load_file

    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    return ["--model_name_or_path", folder]


def deeper_config_than_weights(tmp_path, tiny_models):
    """The reproduction: a causal LM whose config promises 2 more layers than its weights hold."""
    folder = tmp_path / "deeper"
    shutil.copytree(tiny_models["causal"], folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"num_hidden_layers": config["num_hidden_layers"] + 2}))
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


def missing_video(tmp_path, tiny_models):
    (tmp_path / "videos").mkdir()
    return ["--model_name_or_path", tiny_models["video"], "--video_dir", tmp_path / "videos"]


def folder_output(tmp_path, tiny_models):
    (tmp_path / "predictions.jsonl").mkdir()
    return ["--model_name_or_path", tiny_models["causal"], "--output_file", tmp_path / "predictions.jsonl"]


def model(kind, *flags):
    return lambda tmp_path, tiny_models: ["--model_name_or_path", tiny_models[kind], *flags]


def video_model(*flags):
    """The tiny LLaVA (its processor has no video processor) with an empty --video_dir and `flags`."""

    def make(tmp_path, tiny_models):
        (tmp_path / "videos").mkdir()
        return ["--model_name_or_path", tiny_models["video"], "--video_dir", tmp_path / "videos", *flags]

    return make


def processor_needing_torchvision(tmp_path, tiny_models):
    """The tiny LLaVA whose processor is told to be Video-LLaVA's, whose video processor needs torchvision."""
    folder = tmp_path / "video_llava"
    shutil.copytree(tiny_models["video"], folder)
    config = json.loads((folder / "processor_config.json").read_text())
    config["processor_class"] = "VideoLlavaProcessor"
    config["video_processor"] = {"video_processor_type": "VideoLlavaVideoProcessor"}
    (folder / "processor_config.json").write_text(json.dumps(config))
    (tmp_path / "videos").mkdir()
    return ["--model_name_or_path", folder, "--video_dir", tmp_path / "videos", "--output_file", tmp_path / "o.jsonl"]


def before_the_data(make_flags):
    """The flags of `make_flags` with a dataset that does not exist: the refusal must come before it is read."""
    return lambda tmp_path, tiny_models: [
        *make_flags(tmp_path, tiny_models),
        "--dataset_name",
        tmp_path / "a dataset never read",
    ]


def broken_config(tmp_path, tiny_models):
    folder = tmp_path / "broken"
    shutil.copytree(tiny_models["causal"], folder)
    (folder / "config.json").write_text('{"model_type": "llama",\n')
    return ["--model_name_or_path", folder]


def folder_without_config(tmp_path, tiny_models):
    (tmp_path / "empty").mkdir()
    return ["--model_name_or_path", tmp_path / "empty"]


def model_file(tmp_path, tiny_models):
    return ["--model_name_or_path", tiny_models["causal"] / "model.safetensors"]


def videos_with(tmp_path, index: int, write) -> Path:
    """A one-second video for every test clip but clip `index`, whose file `write(path)` makes."""
    folder = tmp_path / "videos"
    folder.mkdir()
    for number, record in enumerate(sample_test_records()):
        path = folder / f"{clip_id(record['video_id'], record['video_start_time'], record['video_end_time'])}.mp4"
        write(path) if number == index else write_video(path, seconds=1, fps=2)
    return folder


def a_bad_video(write):
    """The video model on the test videos (1 s at 2 fps), the last clip's replaced by `write`: the refusal comes
    before the first batch (of 16) is written."""
    return lambda tmp_path, tiny_models: [
        "--model_name_or_path",
        tiny_models["video"],
        "--video_dir",
        videos_with(tmp_path, LAST, write),
        "--num_frames",
        "2",
    ]


def damaged_part(tmp_path, tiny_models):
    """A run in progress whose settings file is not an object."""
    (tmp_path / ".predictions.jsonl.parts").mkdir()
    (tmp_path / ".predictions.jsonl.parts" / "settings.json").write_text("[]")
    return ["--model_name_or_path", tiny_models["causal"]]


FIRST = sample_test_records()[0]
LAST = len(sample_test_records()) - 1
LAST_RECORD = sample_test_records()[LAST]


def write_whole_video_ending_early(path: Path) -> None:
    """Instead of the clip's own file `path`, the clip's whole video, which ends 2 s into the (10 s) clip."""
    video_id, start, _ = path.stem.rsplit("_", 2)
    write_video(path.with_name(f"{video_id}.mp4"), seconds=int(start) + 2, fps=2)


LAST_CLIP = "{video_id}, {video_start_time}-{video_end_time} s".format(**sample_test_records()[LAST])
# id -> (the flags, made in the test's folder; the exit status; the pattern of the one line)
CASES = {
    "a model folder that does not exist": (
        lambda tmp_path, tiny_models: ["--model_name_or_path", "./no/such/model"],
        DATA,
        r"--model_name_or_path ./no/such/model: no such folder \(and not a Hub model id\)",
    ),
    "a model of no supported kind": (vision_only_model, USAGE, "model type 'vit' is none of the kinds"),
    "a video model without --video_dir": (model("video"), USAGE, "is a video-language model: give --video_dir"),
    "a template without {masked_caption}": (
        model("causal", "--prompt", "Fill the blank."),
        USAGE,
        "--prompt: must contain {masked_caption}",
    ),
    "a template with another field": (
        model("causal", "--prompt", "{masked_caption} {label}"),
        USAGE,
        "--prompt: may only use {masked_caption}, got {label}",
    ),
    "a template with a lone brace": (
        model("causal", "--prompt", "{masked_caption} }"),
        USAGE,
        "--prompt: not a valid template",
    ),
    "a template with a format spec": (
        before_the_data(model("causal", "--prompt", "{masked_caption:d}")),
        USAGE,
        r"--prompt: \{masked_caption:d\} has a format spec or conversion; write \{masked_caption\} alone",
    ),
    "a template with a conversion": (
        before_the_data(model("causal", "--prompt", "Fill {masked_caption!r}")),
        USAGE,
        r"--prompt: \{masked_caption!r\} has a format spec or conversion; write \{masked_caption\} alone",
    ),
    "an output that is not JSON Lines": (
        before_the_data(model("causal", "--output_file", "preds.json")),
        USAGE,
        r"--output_file: predictions are JSON Lines: name a \.jsonl file, got 'preds.json'",
    ),
    "--max_new_tokens beyond a causal LM's positions": (
        before_the_data(model("causal", "--max_new_tokens", "1000000000")),
        USAGE,
        r"--max_new_tokens 1000000000: more than the 2048 positions of .*causal's text model$",
    ),
    "--max_new_tokens beyond what a T5 was trained on": (
        before_the_data(model("seq2seq", "--max_new_tokens", "513")),
        USAGE,
        r"--max_new_tokens 513: more than .*seq2seq generates \(it states no maximum of positions: at most 512, the "
        r"length T5 was trained on\)$",
    ),
    "--prompt for a seq2seq model": (
        model("seq2seq", "--prompt", "{masked_caption}"),
        USAGE,
        "--prompt is for causal and video-language models; a seq2seq LM uses the paper's",
    ),
    "--read_noun_phrases for a seq2seq model": (
        before_the_data(model("seq2seq", "--read_noun_phrases")),
        USAGE,
        "--read_noun_phrases is for causal and video-language models, which reply in words; a seq2seq LM answers in "
        "the paper's format$",
    ),
    "a --spacy_model that is not installed": (
        model("causal", "--spacy_model", "en_no_such_pipeline"),
        USAGE,
        "spaCy pipeline 'en_no_such_pipeline' cannot be loaded",
    ),
    "--video_dir for a causal model": (
        lambda tmp_path, tiny_models: ["--model_name_or_path", tiny_models["causal"], "--video_dir", tmp_path],
        USAGE,
        "--video_dir is for video-language models; a causal LM does not read",
    ),
    "--num_beams 0": (model("causal", "--num_beams", "0"), USAGE, "--num_beams: must be at least 1, got 0"),
    "--revision with a local folder": (model("causal", "--revision", "v1"), USAGE, "--revision v1 applies to a Hub"),
    "--per_device_eval_batch_size 0": (
        model("causal", "--per_device_eval_batch_size", "0"),
        USAGE,
        "--per_device_eval_batch_size: must be at least 1, got 0",
    ),
    "--max_predict_samples -1": (
        model("causal", "--max_predict_samples", "-1"),
        USAGE,
        "--max_predict_samples: must be at least 1, got -1",
    ),
    "a --video_dir that does not exist": (
        model("video", "--video_dir", "/no/such/videos"),
        DATA,
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
        folder_output,
        USAGE,
        "is a folder; give a file name",
    ),
    "an output this command did not write": (foreign_output, USAGE, "exists and was not written by fiberbench predict"),
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
        "--dataset_name .*no_such_dataset: no such folder \\(and not a Hub dataset id\\)",
    ),
    "a seq2seq tokenizer without sentinels": (
        seq2seq_without_sentinels,
        USAGE,
        "the paper's zero-shot format needs T5's sentinel tokens",
    ),
    "a model folder with only a pickle": (
        before_the_data(pickle_only_model),
        DATA,
        "pickled: no model.safetensors in it; fiberbench predict reads only safetensors weights, never a pickle$",
    ),
    "a config promising more layers than the weights hold": (
        deeper_config_than_weights,
        DATA,
        r"deeper: its weights do not match its config \(\d+ missing \(model.layers.\d+\.",
    ),
    "a causal LM run as a FIBER model": (
        before_the_data(model("causal", "--model_type", "fiber")),
        USAGE,
        "--model_type fiber: .* is a 'llama' model, which FiberT5ForConditionalGeneration does not load; its "
        "config makes it a causal LM$",
    ),
    "a FIBER model run as a causal LM": (
        before_the_data(model("fiber", "--model_type", "causal")),
        USAGE,
        "--model_type causal: .* is a 'fiber_t5' model, which AutoModelForCausalLM does not load; its config makes "
        "it a FIBER model$",
    ),
    "a causal LM run as a video-language model": (
        before_the_data(model("causal", "--model_type", "video", "--video_dir", ".")),
        USAGE,
        "--model_type video: .* is a 'llama' model, which AutoModelForImageTextToText does not load",
    ),
    "a broken config.json": (
        before_the_data(broken_config),
        DATA,
        r"broken/config.json: not valid JSON \(Expecting property name enclosed in double quotes: line 2 column 1",
    ),
    "a model folder without config.json": (
        folder_without_config,
        DATA,
        "empty: no config.json in it: not a saved model",
    ),
    "a model path that is a file": (
        model_file,
        USAGE,
        "--model_name_or_path .*model.safetensors is a file; give a model folder or a Hub model id",
    ),
    "a --video_dir that is a file": (
        lambda tmp_path, tiny_models: [
            "--model_name_or_path",
            tiny_models["video"],
            "--video_dir",
            tiny_models["video"] / "config.json",
        ],
        USAGE,
        "--video_dir .*config.json is a file; give the folder of the clips' videos",
    ),
    "a video that cannot be decoded": (
        a_bad_video(lambda path: path.write_text("not a video")),
        DATA,
        r"\.mp4: cannot be decoded \(Invalid data found when processing input\) \(the video of clip "
        rf"{LAST_CLIP}\); 1 of 60 clips' videos cannot be used$",
    ),
    "a video of zero duration": (
        a_bad_video(write_zero_duration_video),
        DATA,
        rf"\.mp4: the video lasts 0 s: no frame to sample \(the video of clip {LAST_CLIP}\); 1 of 60 clips'",
    ),
    "a clip with fewer frames than asked": (
        a_bad_video(lambda path: write_video(path, seconds=1, fps=1)),
        DATA,
        r"\.mp4: the clip \(0-1 s at 1 fps\) has 1 frame, fewer than the 2 asked \(--num_frames\) \(the video of clip "
        rf"{LAST_CLIP}\); 1 of 60 clips' videos cannot be used$",
    ),
    # Sent as 200 copies of its last frame with exit 0, before: its header was trusted.
    "a video whose header claims more than its frames": (
        a_bad_video(lambda path: write_video_claiming(path.with_suffix(".mkv"), seconds=1, fps=2, claimed_seconds=100)),
        DATA,
        r"\.mkv: its header says the video lasts 100 s, but its frames end at 1 s: the file is damaged or its header "
        rf"is wrong \(the video of clip {LAST_CLIP}\); 1 of 60 clips' videos cannot be used$",
    ),
    # Sampled from the 2 s there are, before.
    "a whole video that ends 2 s into its clip": (
        a_bad_video(write_whole_video_ending_early),
        DATA,
        rf"{LAST_RECORD['video_id']}\.mp4: the clip runs from {LAST_RECORD['video_start_time']} s to "
        rf"{LAST_RECORD['video_end_time']} s, but the video ends at {LAST_RECORD['video_start_time'] + 2} s: its last "
        rf"8 s are not in the file \(the video of clip {LAST_CLIP}\)",
    ),
    "--video_input video for a processor without a video processor": (
        before_the_data(video_model("--video_input", "video")),
        USAGE,
        r"--video_input video: --model_name_or_path .*: its processor \(LlavaProcessor\) has no video processor; use "
        "--video_input images$",
    ),
    "--video_input for a causal model": (
        model("causal", "--video_input", "images"),
        USAGE,
        "--video_input is for video-language models; a causal LM does not read videos$",
    ),
    "--num_frames and --fps": (
        video_model("--num_frames", "4", "--fps", "2"),
        USAGE,
        "--num_frames and --fps are two ways to choose the frames: give one$",
    ),
    "--max_frames without --fps": (
        video_model("--max_frames", "4"),
        USAGE,
        r"--max_frames applies to --fps \(with --num_frames, the number of frames is fixed\)$",
    ),
    "--fps 0": (video_model("--fps", "0"), USAGE, "--fps: must be a finite number greater than 0, got 0"),
    "--fps nan": (video_model("--fps", "nan"), USAGE, "--fps: must be a finite number greater than 0, got nan"),
    "a run in progress whose settings are not an object": (
        damaged_part,
        DATA,
        r"\.predictions\.jsonl\.parts/settings\.json: expected a JSON object, got list$",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_refused_in_one_line(case, tiny_models, tmp_path, cli_error):
    make_flags, status, pattern = CASES[case]
    exit_status, line = refused(cli_error, tmp_path, make_flags(tmp_path, tiny_models), "predictions.jsonl")
    assert exit_status == status, line
    assert re.search(pattern, line), line


def predicted(tmp_path, tiny_models, finished_runs) -> list:
    """The flags of a finished run (the causal model, 2 clips), copied into tmp_path/predictions.jsonl."""
    output_file = copy_finished_run(finished_runs, "predictions", tmp_path)
    return ["--model_name_or_path", tiny_models["causal"], "--output_file", output_file, *FINISHED_RUNS["predictions"]]


def other_settings(tmp_path, tiny_models, finished_runs) -> list:
    """A run over a finished one with other decoding settings."""
    predicted(tmp_path, tiny_models, finished_runs)
    return [
        "--model_name_or_path",
        tiny_models["causal"],
        *FINISHED_RUNS["predictions"],
        "--num_beams",
        "3",
        "--no_only_noun_phrases",
    ]


def damaged(edit_metadata=None, edit_row=None):
    """A finished run whose metadata (or first row) was changed by `edit_metadata` (`edit_row`)."""

    def make(tmp_path, tiny_models, finished_runs):
        flags = predicted(tmp_path, tiny_models, finished_runs)
        if edit_metadata:
            metadata = tmp_path / "predictions.metadata.json"
            metadata.write_text(json.dumps(edit_metadata(json.loads(metadata.read_text()))))
        if edit_row:
            output = tmp_path / "predictions.jsonl"
            first, *others = output.read_text().splitlines()
            output.write_text("".join(line + "\n" for line in [json.dumps(edit_row(json.loads(first))), *others]))
        return flags

    return make


# A finished output in the way: id -> (the flags, made in the test's folder from the tiny models and a finished run;
# the exit status; the pattern of the one line)
FINISHED_OUTPUT_CASES = {
    "an output made with other settings": (
        other_settings,
        USAGE,
        r"holds predictions made with other settings \(decoding.num_beams: 3 here, 1 there",
    ),
    "an output's metadata that is a list": (
        damaged(edit_metadata=lambda metadata: [metadata]),
        USAGE,
        "predictions.jsonl exists and was not written by fiberbench predict \\(its record predictions.metadata.json "
        "is missing or not a record\\); nothing is replaced",
    ),
    "an output's metadata without its output section": (
        damaged(edit_metadata=lambda metadata: {key: value for key, value in metadata.items() if key != "output"}),
        DATA,
        "predictions.metadata.json: field 'output' is missing$",
    ),
    "an output row without a field": (
        damaged(edit_row=lambda row: {name: value for name, value in row.items() if name != "video_end_time"}),
        DATA,
        "predictions.jsonl: line 1: field 'video_end_time' is missing$",
    ),
}


@pytest.mark.parametrize("case", FINISHED_OUTPUT_CASES)
def test_a_finished_output_in_the_way_is_refused_in_one_line(case, tiny_models, finished_runs, tmp_path, cli_error):
    make_flags, status, pattern = FINISHED_OUTPUT_CASES[case]
    flags = make_flags(tmp_path, tiny_models, finished_runs)
    exit_status, line = refused(cli_error, tmp_path, flags, "predictions.jsonl")
    assert exit_status == status, line
    assert re.search(pattern, line), line


@pytest.mark.parametrize(
    "hub, reason",
    [
        ({"HF_HUB_OFFLINE": "1"}, "and HF_HUB_OFFLINE is set. Ways out: pass a local model folder"),
        # A port nothing listens on: the Hub cannot be reached, and no retry warnings come before the line.
        ({"HF_ENDPOINT": "http://127.0.0.1:9"}, "and the Hub at http://127.0.0.1:9 cannot be reached"),
    ],
    ids=["offline", "unreachable"],
)
def test_a_model_id_that_cannot_be_loaded_is_one_line(tmp_path, hub, reason):
    """HF_HUB_OFFLINE=1 or a Hub that does not answer (set before the libraries start, as users do)."""
    environment = {**os.environ, **hub, "HF_HOME": str(tmp_path / "hf")}
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
    assert result.returncode == DATA
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(
        "fiberbench predict: error: --model_name_or_path org/not-a-model: not a local folder, not in the Hugging Face "
        f"cache ({tmp_path / 'hf' / 'hub'}), "
    )
    assert reason in line and "`hf download org/not-a-model`" in line
    assert not (tmp_path / "predictions.jsonl").exists()


def test_a_processor_that_needs_torchvision_says_how_to_install(tiny_models, tmp_path, cli_error):
    """Without torchvision, transformers builds no video processor, so such a model's processor cannot be built."""
    if importlib.util.find_spec("torchvision") is not None:
        pytest.skip("torchvision is installed here (the video tests run video processors)")
    exit_status, line = cli_error("predict", *processor_needing_torchvision(tmp_path, tiny_models))
    assert exit_status == USAGE
    assert line.endswith(
        "its processor cannot be built here (VideoLlavaVideoProcessor requires the Torchvision library but it was "
        "not found in your environment); install torch and torchvision as a "
        'matching pair, then pip install -e ".[video]" (README: "Evaluate a video LLM")'
    ), line


def test_a_clip_twice_in_the_split_is_refused():
    from datasets import Dataset

    rows = [{"video_id": "abc", "video_start_time": 1, "video_end_time": 11}] * 2
    with pytest.raises(ValueError, match=r"data.json, split test: rows 0 and 1 are the same clip \('abc', 1, 11\)"):
        clip_keys(Dataset.from_list(rows), "data.json, split test")
    assert json.dumps(clip_keys(Dataset.from_list(rows[:1]), "x")) == '[["abc", 1, 11]]'


def test_a_video_id_leading_out_of_the_video_dir_is_refused_before_any_video_is_opened(
    tmp_path, tiny_models, sample_with, cli_error
):
    """A dataset not made by build-dataset may hold any id; `../outside/evil` would be read as ../outside/evil.mp4."""
    dataset = sample_with("video_id", 0, "../outside/evil")
    (tmp_path / "outside").mkdir()
    write_video(tmp_path / "outside" / "evil.mp4", seconds=400, fps=1)
    (tmp_path / "videos").mkdir()
    output = tmp_path / "predictions.jsonl"
    status, line = cli_error(
        "predict", "--model_name_or_path", tiny_models["video"], "--dataset_name", dataset, "--video_dir",
        tmp_path / "videos", "--skip_missing_videos", "--output_file", output,
    )
    assert status == DATA and line.endswith(
        f"--dataset_name {dataset}: split test, row 0: field 'video_id': '../outside/evil' is not a plain video id "
        "(only A-Z, a-z, 0-9, '_' and '-')"
    ), line
    assert not output.exists()


def test_a_device_this_torch_cannot_use_is_one_line(tiny_models, tmp_path, cli_error):
    """A GPU on a CPU-only torch (or one past the last GPU) failed as the weights loaded, with a traceback."""
    device = f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda:0"
    status, line = cli_error(
        "predict", "--model_name_or_path", tiny_models["causal"], "--device_map", device, "--max_predict_samples", "2",
        "--output_file", tmp_path / "predictions.jsonl",
    )
    assert status == USAGE and re.search(rf"--device_map {device}: this (torch .* has no cuda device|machine has)", line)
    assert not (tmp_path / "predictions.jsonl").exists()
