"""Bad inputs to `fiberbench predict`: one line each, naming what to fix, with the right exit status and nothing
written. One row per case: the flags (made in the test's folder `t` from the tiny models `m`), status, the line."""

import json
import os
import re
import shutil

import pytest
import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration, ViTConfig, ViTModel

from fiberbench.records import clip_id

from ..built_once import built_once
from ..processes import modules_loaded
from .conftest import DATA, KEYS, SPACY, USAGE, predict, write_video, write_video_claiming, write_zero_duration_video


def copied(change, kind="causal"):
    """A copy of a tiny model, which `change(folder)` changes."""
    def flags(t, m):
        shutil.copytree(m[kind], t / "model")
        change(t / "model")
        return ["--model_name_or_path", t / "model"]
    return flags


def edit_json(path, edit):
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))


def only_a_pickle(folder):
    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()


def replaced_by(model, tokenizer=None):
    """The folder emptied, then holding `model` (and `tokenizer`)."""
    def change(folder):
        shutil.rmtree(folder)
        model.save_pretrained(folder)
        tokenizer and tokenizer.save_pretrained(folder)
    return change


NO_SENTINELS = PreTrainedTokenizerFast(  # a T5's tokenizer without <extra_id_0>: the paper's format cannot be written
    tokenizer_object=Tokenizer(models.WordLevel({"<pad>": 0, "</s>": 1, "<unk>": 2}, unk_token="<unk>")),
    unk_token="<unk>", pad_token="<pad>", eos_token="</s>")
TINY_T5 = T5Config(vocab_size=3, d_model=8, d_kv=4, d_ff=8, num_layers=1, num_heads=2)
TINY_VIT = ViTConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8)


def model(kind, *flags):
    return lambda t, m: ["--model_name_or_path", m[kind], *flags]


def videos(*flags):
    """The tiny LLaVA with an empty --video_dir."""
    return lambda t, m: (t / "v").mkdir() or ["--model_name_or_path", m["video"], "--video_dir", t / "v", *flags]


def before_the_data(make):
    """`make`'s flags with a dataset that does not exist: the refusal comes before it is read."""
    return lambda t, m: [*make(t, m), "--dataset_name", t / "never read"]


def a_bad_video(write):
    """The video model on 1 s videos of every test clip, the last one's made by `write(path)` instead."""
    def make(t, m):
        (t / "videos").mkdir()
        for key in KEYS:
            path = t / "videos" / f"{clip_id(*key)}.mp4"
            write(path) if key == KEYS[-1] else write_video(path, seconds=1, fps=2)
        return ["--model_name_or_path", m["video"], "--video_dir", t / "videos", "--num_frames", "2"]
    return make


def ending_early(path):
    """The clip's whole video instead of its own file, ending 2 s into the clip."""
    write_video(path.with_name(f"{KEYS[-1][0]}.mp4"), seconds=KEYS[-1][1] + 2, fps=2)


def template(text):
    return copied(lambda folder: (folder / "chat_template.jinja").write_text(text))


LAST = f"the video of clip {KEYS[-1][0]}, {KEYS[-1][1]}-{KEYS[-1][2]} s"
GPU = f"cuda:{torch.cuda.device_count()}"  # one past the last, or one of a CPU-only torch
CASES = {
    "no model": (lambda t, m: [], USAGE, r"--model_name_or_path is required \(or --reread"),
    "a model folder not there": (model("causal", "--model_name_or_path", "./no/model"), DATA, "no such folder"),
    "a model path that is a file": (lambda t, m: ["--model_name_or_path", m["causal"] / "config.json"], USAGE,
                                    r"config.json is a file; give a model folder or a Hub model id$"),
    "no config.json": (copied(lambda folder: (folder / "config.json").unlink()), DATA, r"no config.json in it: not a"),
    "a broken config.json": (before_the_data(copied(lambda folder: (folder / "config.json").write_text("{,"))), DATA,
                             r"config.json: not valid JSON \(Expecting property name enclosed in double quotes"),
    "a model of no kind predict runs": (copied(replaced_by(ViTModel(TINY_VIT))), USAGE, "model type 'vit' is none of"),
    "weights only in a pickle": (before_the_data(copied(only_a_pickle)), DATA,
                                 "model: no model.safetensors in it; fiberbench predict reads only safetensors"),
    "a config promising more layers than the weights": (copied(lambda folder: edit_json(
        folder / "config.json", lambda config: config | {"num_hidden_layers": 3})), DATA,
        r"its weights do not match its config \(\d+ missing \(model.layers.\d+\."),
    "a seq2seq tokenizer without sentinels": (copied(replaced_by(T5ForConditionalGeneration(TINY_T5), NO_SENTINELS)),
                                              USAGE, "the paper's zero-shot format needs T5's sentinel tokens"),
    "a causal LM run as a FIBER model": (before_the_data(model("causal", "--model_type", "fiber")), USAGE,
                                         "'llama' model, which FiberT5ForConditionalGeneration does not load; its "
                                         "config makes it a causal LM$"),
    "a FIBER model run as a video LLM": (model("fiber", "--model_type", "video", "--video_dir", "."), USAGE,
                                         "'fiber_t5' model, which AutoModelForImageTextToText does not load"),
    "a chat template's syntax error": (template("{% for m in messages %}"), DATA,
                                       r"its chat template cannot be rendered \(TemplateSyntaxError: "),
    "a chat template that raises": (template("{{ raise_exception('French only') }}"), DATA,
                                    r"its chat template cannot be rendered \(TemplateError: French only\)$"),
    "a chat template reading no message": (template("{{ messages[5]['content'] }}"), DATA,
                                           r"its chat template cannot be rendered \(UndefinedError: "),
    "a prompt without its field": (model("causal", "--prompt", "Fill."), USAGE, "must contain {masked_caption}"),
    "a prompt with another field": (model("causal", "--prompt", "{masked_caption} {label}"), USAGE,
                                    "--prompt: may only use {masked_caption}, got {label}"),
    "a prompt with a lone brace": (model("causal", "--prompt", "{masked_caption} }"), USAGE, "not a valid template"),
    "a prompt with a format spec": (model("causal", "--prompt", "{masked_caption:>99}"), USAGE,
                                    r"\{masked_caption:>99\} has a format spec or conversion"),
    "--prompt for a seq2seq LM": (model("seq2seq", "--prompt", "{masked_caption}"), USAGE,
                                  "--prompt is for causal and video-language models; a seq2seq LM uses the paper's"),
    "--read_noun_phrases for a FIBER model": (model("fiber", "--read_noun_phrases"), USAGE,
                                              "--read_noun_phrases is for causal and video-language models"),
    "a --spacy_model not installed": (model("causal", "--spacy_model", "en_no"), USAGE,
                                      "noun-phrase step cannot run: .*'en_no'.* pass --no_read_noun_phrases$"),
    "--video_dir for a causal LM": (model("causal", "--video_dir", "."), USAGE,
                                    "--video_dir is for video-language models; a causal LM does not read videos$"),
    "a video LLM without --video_dir": (model("video"), USAGE, "is a video-language model: give --video_dir"),
    "a --video_dir not there": (model("video", "--video_dir", "/no/such"), DATA, "--video_dir /no/such: no such"),
    "a --video_dir that is a file": (model("video", "--video_dir", __file__), USAGE, "is a file; give the folder of"),
    "--num_frames and --fps": (videos("--num_frames", "4", "--fps", "2"), USAGE, "are two ways to choose the frames"),
    "--max_frames without --fps": (videos("--max_frames", "4"), USAGE, r"--max_frames applies to --fps"),
    "--fps nan": (videos("--fps", "nan"), USAGE, "--fps: must be a finite number greater than 0, got nan"),
    "--video_input video, no video processor": (videos("--video_input", "video"), USAGE,
                                                r"\(LlavaProcessor\) has no video processor; use --video_input"),
    "--num_frames for a blind run": (model("video", "--video_input", "none", "--num_frames", "2"), USAGE,
                                     "--num_frames does not apply to --video_input none, which runs the model without"),
    "--video_input images for a causal LM": (model("causal", "--video_input", "images"), USAGE,
                                             "--video_input is for video-language models; a causal LM does not read"),
    "--num_beams 0": (model("causal", "--num_beams", "0"), USAGE, "--num_beams: must be at least 1, got 0"),
    "--dataloader_num_workers -1": (model("causal", "--dataloader_num_workers", "-1"), USAGE, "must be 0 or more"),
    "--max_new_tokens beyond the positions": (model("causal", "--max_new_tokens", "5000"), USAGE,
                                              r"5000: more than the 2048 positions of .*causal's text model$"),
    "--max_new_tokens beyond T5's training": (model("seq2seq", "--max_new_tokens", "513"), USAGE,
                                              r"states no maximum of positions: at most 512, the length T5 was"),
    "--revision with a local folder": (model("causal", "--revision", "v1"), USAGE, "--revision v1 applies to a Hub"),
    "--device_map on a GPU not there": (model("causal", "--device_map", GPU), USAGE,
                                        f"--device_map {GPU}: neither a way to spread the model .* nor a device"),
    "an output not JSON Lines": (model("causal", "--output_file", "p.json"), USAGE, r"name a \.jsonl file"),
    "an output inside the model folder": (lambda t, m: ["--model_name_or_path", m["causal"], "--output_file",
                                                        m["causal"] / "p.jsonl"], USAGE, "lies inside the input"),
    "an output that is a folder": (lambda t, m: (t / "predictions.jsonl").mkdir() or [
        "--model_name_or_path", m["causal"]], USAGE, "is a folder; give a file name"),
    "an output of no command": (lambda t, m: (t / "predictions.jsonl").write_text("my notes\n") and [
        "--model_name_or_path", m["causal"]], USAGE, "exists and has no record"),
    "an unknown split": (model("causal", "--split", "dev"), DATA, r"has no split 'dev' \(splits: train, validation"),
    "a dataset not there": (model("causal", "--dataset_name", "./no_data"), DATA, r"--dataset_name ./no_data: no such"),
    "a clip without a video": (videos(), DATA, f"no video for clip {KEYS[0][0]} .*looked for {clip_id(*KEYS[0])}"),
    "a video that cannot be decoded": (a_bad_video(lambda path: path.write_text("not a video")), DATA,
                                       rf"cannot be decoded \(Invalid data .*\) \({LAST}\); 1 of 60 clips' videos"),
    "a video of zero duration": (a_bad_video(write_zero_duration_video), DATA,
                                 rf"\.mp4: the video lasts 0 s: no frame to sample \({LAST}\)"),
    "a clip of fewer frames than asked": (a_bad_video(lambda path: write_video(path, seconds=1, fps=1)), DATA,
                                          r"has 1 frame, fewer than the 2 asked \(--num_frames\)"),
    "a header claiming more than the frames": (a_bad_video(lambda path: write_video_claiming(
        path.with_suffix(".mkv"), seconds=1, fps=2, claimed_seconds=100)), DATA,
        r"\.mkv: its header says the video lasts 100 s, but its frames end at 1 s"),
    "a whole video ending 2 s into its clip": (a_bad_video(ending_early), DATA,
                                               rf"but the video ends at {KEYS[-1][1] + 2} s: its last 8 s are not in"),
}


def files(folder) -> list:
    """What `folder` holds (the lock of an output aside: it is taken before an output is refused)."""
    return sorted((file.name, file.read_bytes()) for file in folder.rglob("*") if file.is_file() and ".lock" not in
                  file.name)


@pytest.mark.parametrize("case", CASES)
def test_refused_in_one_line_with_nothing_written(case, tiny_models, tmp_path, cli_error):
    make, status, pattern = CASES[case]
    flags = [str(flag) for flag in make(tmp_path, tiny_models)]
    flags += [] if "--output_file" in flags else ["--output_file", str(tmp_path / "predictions.jsonl")]
    before = files(tmp_path)
    exit_status, line = cli_error("predict", *flags, *([] if "--spacy_model" in flags else SPACY))
    assert exit_status == status and re.search(pattern, line) and files(tmp_path) == before, line


@pytest.fixture(scope="session")
def finished_run(tiny_models, tmp_path_factory):
    """A finished run of the tiny causal LM on 2 clips, its replies read without the noun-phrase step: its folder and
    the flags that made it."""
    flags = ["--model_name_or_path", tiny_models["causal"], "--max_predict_samples", 2, "--no_read_noun_phrases"]
    return built_once(tmp_path_factory, "finished_run", lambda folder: predict(
        flags[1], folder / "predictions.jsonl", *flags[2:])), flags


def finished(tmp_path, finished_run, edit_record=None, edit_row=None) -> list:
    """The finished run copied into `tmp_path`, its record (or first row) changed: the flags that made it."""
    for name in ("predictions.jsonl", "predictions.metadata.json"):
        shutil.copyfile(finished_run[0] / name, tmp_path / name)
    edit_record and edit_json(tmp_path / "predictions.metadata.json", edit_record)
    first, *others = (tmp_path / "predictions.jsonl").read_text().splitlines()
    row = json.dumps((edit_row or (lambda row: row))(json.loads(first)))
    (tmp_path / "predictions.jsonl").write_text("\n".join([row, *others]) + "\n")
    return [*finished_run[1], "--output_file", tmp_path / "predictions.jsonl"]


FINISHED_OUTPUT_CASES = {
    "other settings": ({}, ["--num_beams", "3"], USAGE, r"holds predictions made with other settings \(decoding."
                       "num_beams: 3 here, 1 there; .*pass --overwrite_output_file to replace it"),
    "a record that is a list": ({"edit_record": lambda record: [record]}, [], USAGE,
                                "exists and has no record predictions.metadata.json, not fiberbench predict's"),
    "a row without a field": ({"edit_row": lambda row: {k: v for k, v in row.items() if k != "video_end_time"}}, [],
                              DATA, r"predictions.jsonl: line 1: field 'video_end_time' is missing$"),
    "a row of another clip": ({"edit_row": lambda row: row | {"video_id": "elsewhere"}}, [], DATA,
                              r"line 1: clip \('elsewhere', .*\) is not one of the 2 clips of the split predicted$"),
    "replies not strings": ({"edit_row": lambda row: row | {"raw": 1}}, [], DATA, r"'raw' must be a list of strings"),
    "missing not a bool": ({"edit_row": lambda row: row | {"missing": "yes"}}, [], DATA,
                           r"line 1: field 'missing' must be true or false, got \"yes\"$"),
}


@pytest.mark.parametrize("case", FINISHED_OUTPUT_CASES)
def test_a_finished_output_in_the_way_is_refused_in_one_line(case, finished_run, tmp_path, cli_error):
    edits, extra, status, pattern = FINISHED_OUTPUT_CASES[case]
    flags = finished(tmp_path, finished_run, **edits)
    before = files(tmp_path)
    exit_status, line = cli_error("predict", *flags, *extra)
    assert exit_status == status and re.search(pattern, line) and files(tmp_path) == before, line


def test_overwrite_replaces_an_output_of_other_settings(finished_run, tmp_path):
    flags = finished(tmp_path, finished_run)
    assert predict(flags[1], *flags[-1:], *flags[2:-2], "--num_beams", 2, "--overwrite_output_file") == 0
    assert all(len(json.loads(line)["raw"]) == 2 for line in (tmp_path / "predictions.jsonl").read_text().splitlines())


@pytest.mark.parametrize("hub, reason", [({"HF_HUB_OFFLINE": "1"}, "and HF_HUB_OFFLINE is set. Ways out"),
                                         ({"HF_ENDPOINT": "http://127.0.0.1:9"}, "http://127.0.0.1:9 cannot")],
                         ids=["offline", "unreachable"])
def test_a_model_id_that_cannot_be_loaded_is_one_line(tmp_path, hub, reason):
    """Set before the libraries start, as users do: no retries, no warnings before the line, which comes before torch
    and transformers load (`fiberbench.predict.arguments.check`)."""
    flags = ["predict", "--model_name_or_path", "org/no-model", "--output_file", str(tmp_path / "p.jsonl")]
    loaded, result = modules_loaded(f"from fiberbench.cli import main\nassert main({flags!r}) == {DATA}",
                                    ["torch", "transformers"], env={**os.environ, **hub, "HF_HOME": str(tmp_path)})
    [line] = result.stderr.strip().splitlines()
    assert loaded == [] and not (tmp_path / "p.jsonl").exists() and reason in line
    assert line.startswith("fiberbench predict: error: --model_name_or_path org/no-model: not a local folder, not in "
                           f"the Hugging Face cache ({tmp_path / 'hub'})")