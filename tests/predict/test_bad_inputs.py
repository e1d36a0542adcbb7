"""Bad inputs to `fiberbench predict`: one line each, naming what to fix, with the right exit status and nothing
written. One row per case: the flags (made in the test's folder), the exit status, the pattern of the line."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration, ViTConfig, ViTModel

from fiberbench.records import clip_id

from ..built_once import built_once
from .conftest import DATA, KEYS, SPACY, USAGE, predict, write_video, write_video_claiming, write_zero_duration_video


@pytest.fixture(scope="session")
def finished_run(tiny_models, tmp_path_factory):
    """A finished run of the tiny causal LM on 2 clips, its replies read without the noun-phrase step."""
    flags = ["--max_predict_samples", 2, "--no_read_noun_phrases"]
    folder = built_once(tmp_path_factory, "finished_run", lambda folder: predict(
        tiny_models["causal"], folder / "predictions.jsonl", *flags))
    return folder, ["--model_name_or_path", tiny_models["causal"], *flags]


def copied(make):
    """A model folder: a copy of a tiny model (`make(folder)` changes it)."""
    def flags(tmp_path, models, kind="causal"):
        shutil.copytree(models[kind], tmp_path / "model")
        make(tmp_path / "model")
        return ["--model_name_or_path", tmp_path / "model"]
    return flags


def edit_json(path, edit):
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))


def only_a_pickle(folder):
    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()


def without_sentinels(folder):
    """A T5 whose tokenizer has no <extra_id_0>: the paper's format cannot be written."""
    shutil.rmtree(folder)
    words = Tokenizer(models.WordLevel(vocab={"<pad>": 0, "</s>": 1, "<unk>": 2, "a": 3}, unk_token="<unk>"))
    PreTrainedTokenizerFast(tokenizer_object=words, unk_token="<unk>", pad_token="<pad>", eos_token="</s>").save_pretrained(folder)
    T5ForConditionalGeneration(T5Config(vocab_size=4, d_model=8, d_kv=4, d_ff=8, num_layers=1, num_heads=2)).save_pretrained(folder)


def vision_only(folder):
    shutil.rmtree(folder)
    ViTModel(ViTConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8)).save_pretrained(folder)


def chat_template(template):
    return copied(lambda folder: (folder / "chat_template.jinja").write_text(template))


def model(kind, *flags):
    return lambda tmp_path, models: ["--model_name_or_path", models[kind], *flags]


def video_model(*flags):
    def make(tmp_path, models):
        (tmp_path / "videos").mkdir()
        return ["--model_name_or_path", models["video"], "--video_dir", tmp_path / "videos", *flags]
    return make


def before_the_data(make):
    """`make`'s flags with a dataset that does not exist: the refusal comes before it is read."""
    return lambda tmp_path, models: [*make(tmp_path, models), "--dataset_name", tmp_path / "never read"]


def a_bad_video(write):
    """The video model on 1 s videos of every test clip, the last one's made by `write(path)` instead."""
    def make(tmp_path, models):
        folder = tmp_path / "videos"
        folder.mkdir()
        for key in KEYS:
            (write if key == KEYS[-1] else lambda path: write_video(path, seconds=1, fps=2))(folder / f"{clip_id(*key)}.mp4")
        return ["--model_name_or_path", models["video"], "--video_dir", folder, "--num_frames", "2"]
    return make


def ending_early(path):
    """The clip's whole video instead of its own file, ending 2 s into the clip."""
    write_video(path.with_name(f"{KEYS[-1][0]}.mp4"), seconds=KEYS[-1][1] + 2, fps=2)


LAST = f"the video of clip {KEYS[-1][0]}, {KEYS[-1][1]}-{KEYS[-1][2]} s"
CASES = {
    "no model": (lambda tmp_path, models: [], USAGE, r"--model_name_or_path is required \(or --reread"),
    "a model folder that does not exist": (model("causal", "--model_name_or_path", "./no/such/model"), DATA,
                                           r"--model_name_or_path ./no/such/model: no such folder \(and not a Hub"),
    "a model path that is a file": (lambda tmp_path, models: ["--model_name_or_path", models["causal"] / "config.json"],
                                    USAGE, r"config.json is a file; give a model folder or a Hub model id$"),
    "a model folder without config.json": (copied(lambda folder: (folder / "config.json").unlink()), DATA,
                                           r"model: no config.json in it: not a saved model$"),
    "a broken config.json": (before_the_data(copied(lambda folder: (folder / "config.json").write_text('{"a": 1,\n'))),
                             DATA, r"config.json: not valid JSON \(Expecting property name enclosed in double quotes"),
    "a model of no kind predict runs": (copied(vision_only), USAGE, "model type 'vit' is none of the kinds"),
    "weights only in a pickle": (before_the_data(copied(only_a_pickle)), DATA,
                                 "model: no model.safetensors in it; fiberbench predict reads only safetensors weights"),
    "a config promising more layers than the weights": (
        copied(lambda folder: edit_json(folder / "config.json", lambda c: c | {"num_hidden_layers": 3})), DATA,
        r"its weights do not match its config \(\d+ missing \(model.layers.\d+\."),
    "a seq2seq tokenizer without sentinels": (copied(without_sentinels), USAGE,
                                              "the paper's zero-shot format needs T5's sentinel tokens"),
    "a causal LM run as a FIBER model": (before_the_data(model("causal", "--model_type", "fiber")), USAGE,
                                         r"is a 'llama' model, which FiberT5ForConditionalGeneration does not load; its "
                                         "config makes it a causal LM$"),
    "a FIBER model run as a video LLM": (before_the_data(model("fiber", "--model_type", "video", "--video_dir", ".")),
                                         USAGE, "is a 'fiber_t5' model, which AutoModelForImageTextToText does not load"),
    "a chat template with a syntax error": (chat_template("{% for m in messages %}"), DATA,
                                            r"its chat template cannot be rendered \(TemplateSyntaxError: "),
    "a chat template that raises": (chat_template("{{ raise_exception('French only') }}"), DATA,
                                    r"its chat template cannot be rendered \(TemplateError: French only\)$"),
    "a chat template reading a message not there": (chat_template("{{ messages[5]['content'] }}"), DATA,
                                                    r"its chat template cannot be rendered \(UndefinedError: "),
    "a template without {masked_caption}": (model("causal", "--prompt", "Fill the blank."), USAGE,
                                            "--prompt: must contain {masked_caption}"),
    "a template with another field": (model("causal", "--prompt", "{masked_caption} {label}"), USAGE,
                                      "--prompt: may only use {masked_caption}, got {label}"),
    "a template with a lone brace": (model("causal", "--prompt", "{masked_caption} }"), USAGE,
                                     "--prompt: not a valid template"),
    "a template with a format spec": (model("causal", "--prompt", "{masked_caption:>99}"), USAGE,
                                      r"\{masked_caption:>99\} has a format spec or conversion"),
    "--prompt for a seq2seq LM": (model("seq2seq", "--prompt", "{masked_caption}"), USAGE,
                                  "--prompt is for causal and video-language models; a seq2seq LM uses the paper's"),
    "--read_noun_phrases for a FIBER model": (model("fiber", "--read_noun_phrases"), USAGE,
                                              "--read_noun_phrases is for causal and video-language models"),
    "a --spacy_model not installed": (model("causal", "--spacy_model", "en_nothing"), USAGE,
                                      "noun-phrase step cannot run: .*'en_nothing'.* pass --no_read_noun_phrases$"),
    "--video_dir for a causal LM": (model("causal", "--video_dir", "."), USAGE,
                                    "--video_dir is for video-language models; a causal LM does not read videos$"),
    "a video LLM without --video_dir": (model("video"), USAGE, "is a video-language model: give --video_dir"),
    "a --video_dir that does not exist": (model("video", "--video_dir", "/no/such"), DATA, "--video_dir /no/such: no such"),
    "a --video_dir that is a file": (model("video", "--video_dir", __file__), USAGE, "is a file; give the folder of"),
    "--num_frames and --fps": (video_model("--num_frames", "4", "--fps", "2"), USAGE,
                               "--num_frames and --fps are two ways to choose the frames: give one$"),
    "--max_frames without --fps": (video_model("--max_frames", "4"), USAGE, r"--max_frames applies to --fps"),
    "--fps nan": (video_model("--fps", "nan"), USAGE, "--fps: must be a finite number greater than 0, got nan"),
    "--video_input video without a video processor": (video_model("--video_input", "video"), USAGE,
                                                      r"\(LlavaProcessor\) has no video processor; use --video_input images$"),
    "--num_beams 0": (model("causal", "--num_beams", "0"), USAGE, "--num_beams: must be at least 1, got 0"),
    "--dataloader_num_workers -1": (model("causal", "--dataloader_num_workers", "-1"), USAGE, "must be 0 or more, got -1"),
    "--max_new_tokens beyond a causal LM's positions": (model("causal", "--max_new_tokens", "5000"), USAGE,
                                                        r"5000: more than the 2048 positions of .*causal's text model$"),
    "--max_new_tokens beyond what T5 was trained on": (model("seq2seq", "--max_new_tokens", "513"), USAGE,
                                                       r"states no maximum of positions: at most 512, the length T5 was"),
    "--revision with a local folder": (model("causal", "--revision", "v1"), USAGE, "--revision v1 applies to a Hub"),
    "--device_map on a GPU this torch has not": (model("causal", "--device_map", f"cuda:{torch.cuda.device_count()}"),
                                                 USAGE, r"--device_map cuda:\d: neither a way to spread the model .* nor a device this torch can use"),
    "an output that is not JSON Lines": (model("causal", "--output_file", "p.json"), USAGE, r"name a \.jsonl file"),
    "an output inside the model folder": (lambda tmp_path, models: [
        "--model_name_or_path", models["causal"], "--output_file", models["causal"] / "p.jsonl"], USAGE,
        "lies inside the input folder"),
    "an output that is a folder": (lambda tmp_path, models: (tmp_path / "predictions.jsonl").mkdir() or [
        "--model_name_or_path", models["causal"]], USAGE, "is a folder; give a file name"),
    "an output this command did not write": (lambda tmp_path, models: (tmp_path / "predictions.jsonl").write_text(
        "my notes\n") and ["--model_name_or_path", models["causal"]], USAGE, "exists and has no record"),
    "an unknown split": (model("causal", "--split", "dev"), DATA, r"has no split 'dev' \(splits: train, validation"),
    "a dataset that does not exist": (model("causal", "--dataset_name", "./no_such_dataset"), DATA,
                                      r"--dataset_name ./no_such_dataset: no such folder"),
    "a clip without a video": (video_model(), DATA, f"no video for clip {KEYS[0][0]} .*looked for {clip_id(*KEYS[0])}"),
    "a video that cannot be decoded": (a_bad_video(lambda path: path.write_text("not a video")), DATA,
                                       rf"cannot be decoded \(Invalid data .*\) \({LAST}\); 1 of 60 clips' videos"),
    "a video of zero duration": (a_bad_video(write_zero_duration_video), DATA,
                                 rf"\.mp4: the video lasts 0 s: no frame to sample \({LAST}\)"),
    "a clip with fewer frames than asked": (a_bad_video(lambda path: write_video(path, seconds=1, fps=1)), DATA,
                                            r"has 1 frame, fewer than the 2 asked \(--num_frames\)"),
    "a header claiming more than the frames": (
        a_bad_video(lambda path: write_video_claiming(path.with_suffix(".mkv"), seconds=1, fps=2, claimed_seconds=100)),
        DATA, r"\.mkv: its header says the video lasts 100 s, but its frames end at 1 s"),
    "a whole video ending 2 s into its clip": (a_bad_video(ending_early), DATA,
                                               rf"but the video ends at {KEYS[-1][1] + 2} s: its last 8 s are not in"),
}


@pytest.mark.parametrize("case", CASES)
def test_refused_in_one_line_with_nothing_written(case, tiny_models, tmp_path, cli_error):
    make, status, pattern = CASES[case]
    flags = [str(flag) for flag in make(tmp_path, tiny_models)]
    flags += [] if "--output_file" in flags else ["--output_file", str(tmp_path / "predictions.jsonl")]
    written = lambda: sorted((path.name, path.stat().st_size) for path in tmp_path.rglob("*") if path.suffix != ".lock")
    before = written()
    exit_status, line = cli_error("predict", *flags, *([] if "--spacy_model" in flags else SPACY))
    assert exit_status == status and re.search(pattern, line), line
    assert written() == before, "something was written"


def damaged(edit_record=None, edit_row=None, extra=()):
    """The finished run copied, its record (or first row) changed, rerun with `extra` flags."""
    def make(tmp_path, finished_run):
        folder, flags = finished_run
        for name in ("predictions.jsonl", "predictions.metadata.json"):
            shutil.copyfile(folder / name, tmp_path / name)
        if edit_record:
            edit_json(tmp_path / "predictions.metadata.json", edit_record)
        if edit_row:
            first, *others = (tmp_path / "predictions.jsonl").read_text().splitlines()
            (tmp_path / "predictions.jsonl").write_text("\n".join([json.dumps(edit_row(json.loads(first))), *others]) + "\n")
        return [*flags, *extra]
    return make


FINISHED_OUTPUT_CASES = {
    "other settings": (damaged(extra=["--num_beams", "3"]), USAGE, r"holds predictions made with other settings \("
                       r"decoding.num_beams: 3 here, 1 there; .*pass --overwrite_output_file to replace it"),
    "a record that is a list": (damaged(edit_record=lambda record: [record]), USAGE,
                                "exists and has no record predictions.metadata.json, not fiberbench predict's"),
    "a row without a field": (damaged(edit_row=lambda row: {k: v for k, v in row.items() if k != "video_end_time"}),
                              DATA, r"predictions.jsonl: line 1: field 'video_end_time' is missing$"),
    "a row of another clip": (damaged(edit_row=lambda row: row | {"video_id": "elsewhere"}), DATA,
                              r"line 1: clip \('elsewhere', .*\) is not one of the 2 clips of the split predicted$"),
    "replies that are not strings": (damaged(edit_row=lambda row: row | {"raw": 1}), DATA,
                                     r"line 1: field 'raw' must be a list of strings, got 1$"),
}


@pytest.mark.parametrize("case", FINISHED_OUTPUT_CASES)
def test_a_finished_output_in_the_way_is_refused_in_one_line(case, finished_run, tmp_path, cli_error):
    make, status, pattern = FINISHED_OUTPUT_CASES[case]
    flags = [*make(tmp_path, finished_run), "--output_file", tmp_path / "predictions.jsonl"]
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    exit_status, line = cli_error("predict", *flags)
    assert exit_status == status and re.search(pattern, line), line
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir() if path.suffix != ".lock"} == before


def test_overwrite_replaces_an_output_of_other_settings(finished_run, tmp_path):
    flags = damaged(extra=["--num_beams", "2", "--no_only_noun_phrases"])(tmp_path, finished_run)
    assert predict(flags[1], tmp_path / "predictions.jsonl", *flags[2:], "--overwrite_output_file") == 0
    assert all(len(json.loads(line)["raw"]) == 2 for line in (tmp_path / "predictions.jsonl").read_text().splitlines())


@pytest.mark.parametrize("hub, reason", [({"HF_HUB_OFFLINE": "1"}, "and HF_HUB_OFFLINE is set. Ways out"),
                                         ({"HF_ENDPOINT": "http://127.0.0.1:9"}, "the Hub at http://127.0.0.1:9 cannot")],
                         ids=["offline", "unreachable"])
def test_a_model_id_that_cannot_be_loaded_is_one_line(tmp_path, hub, reason):
    """Set before the libraries start, as users do: no retries, no warnings before the line."""
    result = subprocess.run([sys.executable, "-m", "fiberbench.cli", "predict", "--model_name_or_path", "org/no-model",
                             "--output_file", tmp_path / "p.jsonl"], env={**os.environ, **hub, "HF_HOME": str(tmp_path)},
                            capture_output=True, text=True, timeout=120)
    [line] = result.stderr.strip().splitlines()
    assert result.returncode == DATA and line.startswith("fiberbench predict: error: --model_name_or_path org/no-model: "
                                                         f"not a local folder, not in the Hugging Face cache ({tmp_path / 'hub'})")
    assert reason in line and not (tmp_path / "p.jsonl").exists()
