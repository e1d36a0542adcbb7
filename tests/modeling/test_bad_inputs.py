"""Bad inputs to the processor, the model, model loading and `fill_blanks`: each one clear error, nothing half-done."""

import json
import os
import shutil

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, PreTrainedTokenizerFast
from transformers.modeling_outputs import BaseModelOutput

from fiberbench.modeling import FiberProcessor, FiberT5Config, FiberT5ForConditionalGeneration

CAPTION = "A man plays _____ on a stage."


def videos(clips, width=None):  # the clips' features, cut to `width` values per frame when given
    return [clip["video"][:, :width] for clip in clips]


# id -> (fusion, fill_blanks arguments from the sample clips, message pattern of the ValueError)
FILL_BLANKS_CASES = {
    "caption without a blank": ("none", lambda c: {"masked_caption": ["A man plays."]},
                                r"Masked caption 0 must contain exactly one '_____', found 0"),
    "caption with two blanks": ("none", lambda c: {"masked_caption": [CAPTION, "_____ plays _____."]},
                                r"Masked caption 1 must contain exactly one '_____', found 2"),
    "empty list": ("none", lambda c: {"masked_caption": []}, r"Got no masked captions"),
    "caption that is no string": ("none", lambda c: {"masked_caption": [None]},
                                  r"Masked caption 0 must be a string, got NoneType"),
    "features of the wrong width": ("early", lambda c: {"video_features": videos(c, 512)},
                                    r"video_features have 512 values per frame; this model reads video_feature_size"),
    "features of two widths": ("early", lambda c: {"video_features": videos(c[:1]) + videos(c[1:], 8)},
                               r"Video features 1 have 8 values per frame, features 0 have 1024"),
    "3 feature arrays for 2 captions": (
        "early", lambda c: {"masked_caption": [x["masked_caption"] for x in c[:2]], "video_features": videos(c),
                            "batch_size": 2}, r"Got 2 masked captions but 3 video feature arrays"),
    "no features for a video model": ("early", lambda c: {"video_features": None}, r"fusion='early' needs video_"),
    "features for a text-only model": ("none", lambda c: {"video_features": videos(c)},
                                       r"fusion='none' takes no video_features"),
    "features of one dimension": ("early", lambda c: {"video_features": [c[0]["video"][0]] + videos(c[1:])},
                                  r"Video features 0 must be shaped \(frames, size\)"),
    "features with no frame": ("early", lambda c: {"video_features": [np.zeros((0, 1024))] + videos(c[1:])},
                               r"Video features 0 must be shaped .* frames >= 1, got \(0, 1024\)"),
    "features holding NaN": ("early", lambda c: {"video_features": [np.full((4, 1024), np.nan)] + videos(c[1:])},
                             r"Video features 0 hold NaN or infinite values"),
    "ragged features": ("early", lambda c: {"video_features": [[[0.0, 1.0], [0.0]]] + videos(c[1:])},
                        r"Video features 0 are not an array of numbers"),
    "zero beams": ("none", lambda c: {"num_beams": 0}, r"`num_beams` must be a positive integer, got 0"),
    "zero batch size": ("none", lambda c: {"batch_size": 0}, r"`batch_size` must be a positive integer, got 0"),
}


@pytest.mark.parametrize("case", FILL_BLANKS_CASES)
def test_fill_blanks_refuses(case, make_model, processor, sample_clips):
    fusion, make_arguments, message = FILL_BLANKS_CASES[case]
    model = make_model(fusion).train()
    arguments = {"masked_caption": [clip["masked_caption"] for clip in sample_clips]}
    arguments |= {"video_features": None if fusion == "none" else videos(sample_clips)} | make_arguments(sample_clips)
    with pytest.raises(ValueError, match=message) as raised:
        model.fill_blanks(processor, arguments.pop("masked_caption"), only_noun_phrases=False, **arguments)
    assert "\n" not in str(raised.value) and model.training, "one line; the model left in the caller's mode"


# id -> (a call of the processor or the model, message pattern of the ValueError)
CALL_CASES = {
    "fewer labels than captions": (lambda p, m: p(["A _____.", "B _____."], labels=["x"]), "2 masked captions but 1"),
    "fewer videos than captions": (lambda p, m: p(["A _____.", "B _____."], video_features=[np.zeros((3, 1024))]),
                                   "2 masked captions but 1 video feature arrays"),
    "video of three dimensions": (lambda p, m: p(["A _____."], video_features=[np.zeros((2, 3, 1024))]),
                                  r"Video features 0 must be shaped .* got \(2, 3, 1024\)"),
    "a caption without a blank": (lambda p, m: p(["A man plays _____.", "A man plays the guitar."]),
                                  r"Masked caption 1 must contain exactly one '_____', found 0: 'A man plays the"),
    "an infinite value past the single feature": (lambda p, m: FiberProcessor(p.tokenizer, single_feature=True)(
        ["A _____."] * 2, video_features=[np.zeros((32, 1024)), np.where(np.arange(32)[:, None] == 30, np.inf,
                                                                          np.zeros((32, 1024)))]),
        "Video features 1 hold NaN or infinite values"),
    "config of no video layer": (lambda p, m: FiberT5Config(num_video_layers=0), "`num_video_layers` must be a"),
    "config of -1 fusion layers": (lambda p, m: FiberT5Config(num_fusion_layers=-1), "`num_fusion_layers` must be a"),
    "config naming no features": (lambda p, m: FiberT5Config(video_features_name=""),
                                  "`video_features_name` must name the dataset config of the features"),
    "a second not in the clip": (lambda p, m: FiberProcessor(p.tokenizer, feature_second=-1.0), "feature_second"),
    "no video for a video model": (lambda p, m: m("early")(**p(["A _____."], labels=["x"])), "needs video_features"),
    "video for a text-only model": (
        lambda p, m: m("none")(**p(["A _____."], video_features=[np.zeros((2, 1024))], labels=["x"])),
        "takes no video_features"),
    "encoder outputs without the joint mask": (
        lambda p, m: m("early")(encoder_outputs=BaseModelOutput(last_hidden_state=torch.zeros(1, 3, 32)),
                                decoder_input_ids=torch.zeros(1, 1, dtype=torch.long)), "FiberT5EncoderOutput"),
    "a tokenizer without sentinels": (lambda p, m: FiberProcessor(PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel(vocab={"<unk>": 0}, unk_token="<unk>")), unk_token="<unk>")),
        r"The tokenizer has no <extra_id_0> or <extra_id_1>: FIBER needs a T5-style"),
}


@pytest.mark.parametrize("case", CALL_CASES)
def test_bad_calls_are_one_error(case, processor, make_model):
    call, message = CALL_CASES[case]
    with pytest.raises(ValueError, match=message):
        call(processor, make_model)


def pickle_only(folder):
    """The model saved as a pickle (`pytorch_model.bin`), as old checkpoints are: refused, it could run code."""
    torch.save(FiberT5ForConditionalGeneration.from_pretrained(folder).state_dict(), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()


def set_config(**fields):
    config = lambda folder: json.loads((folder / "config.json").read_text(encoding="utf-8"))  # noqa: E731
    return lambda folder: (folder / "config.json").write_text(json.dumps(config(folder) | fields), encoding="utf-8")


# id -> (how the saved folder is spoiled, error, message pattern)
LOADING_CASES = {
    "only a pickle pytorch_model.bin": (pickle_only, OSError, r"no file named model.safetensors"),
    "truncated model.safetensors": (lambda f: os.truncate(f / "model.safetensors", 5000), OSError,
                                    r"safetensors weights of .* cannot be read"),
    "config.json that is not JSON": (lambda f: (f / "config.json").write_text("{"), OSError, r"is not a valid JSON"),
    "no config.json": (lambda f: (f / "config.json").unlink(), (OSError, ValueError),
                       r"has no config.json|Should have a `model_type` key in its config.json"),
    "unknown fusion in config.json": (set_config(fusion="middle"), ValueError, r"`fusion` must be one of"),
    "video_feature_size 0": (set_config(video_feature_size=0), ValueError, r"`video_feature_size` must be a positive"),
    # transformers would leave the second layers random with a log line: the model run would not be the one saved.
    "more layers than the weights hold": (set_config(num_layers=3, num_decoder_layers=3), OSError,
                                          r"do not match its config: \d+ missing \(decoder.block.\d"),
    # The Auto classes find no "llama" model with FIBER's auto_map: they ask for trust_remote_code.
    "another architecture's config.json": (set_config(model_type="llama"), ValueError,
                                           r"holds a 'llama' model: a FIBER model starts from a FIBER or T5 checkpoint"
                                           r"|contains custom code which must be executed"),
}


@pytest.mark.parametrize("loader", [FiberT5ForConditionalGeneration, AutoModelForSeq2SeqLM], ids=lambda c: c.__name__)
@pytest.mark.parametrize("case", LOADING_CASES)
def test_loading_refuses(case, loader, tmp_path, make_model):
    spoil, error, message = LOADING_CASES[case]
    folder = tmp_path / "model"
    make_model("early").save_pretrained(folder)
    spoil(folder)
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    with pytest.raises(error, match=message):
        loader.from_pretrained(folder)
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before, "a failed load changed the folder"


def test_turning_safetensors_off_is_refused_and_the_unspoiled_folder_loads(tmp_path, make_model, processor):
    make_model("none").save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="FIBER models load from safetensors only"):
        FiberT5ForConditionalGeneration.from_pretrained(tmp_path, use_safetensors=False)
    shutil.copytree(processor.tokenizer.name_or_path, tmp_path / "tokenizer")  # the control for the cases above
    model = AutoModelForSeq2SeqLM.from_pretrained(tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "tokenizer")
    assert len(model.fill_blanks(FiberProcessor(tokenizer), [CAPTION], only_noun_phrases=False)) == 1
