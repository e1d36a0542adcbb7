"""Bad inputs to model loading and `fill_blanks`: each one is one clear error, and nothing is lost or half-done."""

import json
import shutil

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, PreTrainedTokenizerFast

from fiberbench.modeling import FiberProcessor, FiberT5ForConditionalGeneration

CAPTION = "A man plays _____ on a stage."


def clip_features(clips, width=None):
    """The clips' features, cut to `width` values per frame when given."""
    return [clip["video"][:, :width] for clip in clips]


# id -> (fusion, keyword arguments of fill_blanks built from the sample clips, error, message pattern)
FILL_BLANKS_CASES = {
    "caption without a blank": (
        "none",
        lambda clips: {"masked_caption": ["A man plays."]},
        ValueError,
        r"Masked caption 0 must contain exactly one '_____', found 0",
    ),
    "caption with two blanks": (
        "none",
        lambda clips: {"masked_caption": [CAPTION, "_____ plays _____."]},
        ValueError,
        r"Masked caption 1 must contain exactly one '_____', found 2",
    ),
    "empty list": ("none", lambda clips: {"masked_caption": []}, ValueError, r"Got no masked captions"),
    "caption that is not a string": (
        "none",
        lambda clips: {"masked_caption": [None]},
        ValueError,
        r"Masked caption 0 must be a string, got NoneType",
    ),
    "features of the wrong width": (
        "early",
        lambda clips: {"video_features": clip_features(clips, 512)},
        ValueError,
        r"video_features have 512 values per frame; this model reads video_feature_size=1024",
    ),
    "features of two widths": (
        "early",
        lambda clips: {"video_features": [clips[0]["video"], clips[1]["video"][:, :8], clips[2]["video"]]},
        ValueError,
        r"Video features 1 have 8 values per frame, features 0 have 1024",
    ),
    "3 feature arrays for 2 captions": (
        "early",
        lambda clips: {
            "masked_caption": [c["masked_caption"] for c in clips[:2]],
            "video_features": clip_features(clips),
            "batch_size": 2,
        },
        ValueError,
        r"Got 2 masked captions but 3 video feature arrays",
    ),
    "1 feature array for 2 captions": (
        "early",
        lambda clips: {
            "masked_caption": [c["masked_caption"] for c in clips[:2]],
            "video_features": clip_features(clips[:1]),
        },
        ValueError,
        r"Got 2 masked captions but 1 video feature arrays",
    ),
    "no features for a video model": (
        "early",
        lambda clips: {"video_features": None},
        ValueError,
        r"fusion='early' needs video_features",
    ),
    "features for a text-only model": (
        "none",
        lambda clips: {"video_features": clip_features(clips)},
        ValueError,
        r"fusion='none' takes no video_features",
    ),
    "features of one dimension": (
        "early",
        lambda clips: {"video_features": [clips[0]["video"][0]] + clip_features(clips[1:])},
        ValueError,
        r"Video features 0 must be shaped \(frames, size\)",
    ),
    "features with no frame": (
        "early",
        lambda clips: {"video_features": [np.zeros((0, 1024))] + clip_features(clips[1:])},
        ValueError,
        r"Video features 0 must be shaped .* frames >= 1, got \(0, 1024\)",
    ),
    "features holding NaN": (
        "early",
        lambda clips: {"video_features": [np.full((4, 1024), np.nan)] + clip_features(clips[1:])},
        ValueError,
        r"Video features 0 hold NaN or infinite values",
    ),
    "ragged features": (
        "early",
        lambda clips: {"video_features": [[[0.0, 1.0], [0.0]]] + clip_features(clips[1:])},
        ValueError,
        r"Video features 0 are not an array of numbers",
    ),
    "zero beams": (
        "none",
        lambda clips: {"num_beams": 0},
        ValueError,
        r"`num_beams` must be a positive integer, got 0",
    ),
    "zero batch size": (
        "none",
        lambda clips: {"batch_size": 0},
        ValueError,
        r"`batch_size` must be a positive integer, got 0",
    ),
}


@pytest.mark.parametrize("case", FILL_BLANKS_CASES)
def test_fill_blanks_refuses(case, make_model, processor, sample_clips):
    fusion, make_arguments, error, message = FILL_BLANKS_CASES[case]
    model = make_model(fusion).train()
    arguments = {"masked_caption": [clip["masked_caption"] for clip in sample_clips]}
    arguments |= {"video_features": None if fusion == "none" else clip_features(sample_clips)}
    arguments |= make_arguments(sample_clips)
    with pytest.raises(error, match=message) as raised:
        model.fill_blanks(processor, arguments.pop("masked_caption"), only_noun_phrases=False, **arguments)
    assert "\n" not in str(raised.value)
    assert model.training, "a refused call must leave the model in the caller's mode"


def test_a_tokenizer_without_sentinels_is_refused():
    word_level = Tokenizer(models.WordLevel(vocab={"<unk>": 0, "a": 1}, unk_token="<unk>"))
    with pytest.raises(ValueError, match=r"The tokenizer has no <extra_id_0> or <extra_id_1>: FIBER needs a T5-style"):
        FiberProcessor(PreTrainedTokenizerFast(tokenizer_object=word_level, unk_token="<unk>"))


def pickle_only(folder):
    """The model saved as a pickle (`pytorch_model.bin`), as old checkpoints are: refused, it could run code."""
    weights = FiberT5ForConditionalGeneration.from_pretrained(folder).state_dict()
    (folder / "model.safetensors").unlink()
    torch.save(weights, folder / "pytorch_model.bin")


def truncate_weights(folder):
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])


def break_config(folder):
    (folder / "config.json").write_text("{", encoding="utf-8")


def set_config(**fields):
    def change(folder):
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        (folder / "config.json").write_text(json.dumps(config | fields), encoding="utf-8")

    return change


# id -> (how the saved folder is spoiled, error, message pattern)
LOADING_CASES = {
    "only a pickle pytorch_model.bin": (pickle_only, OSError, r"no file named model.safetensors"),
    "truncated model.safetensors": (truncate_weights, OSError, r"safetensors weights of .* cannot be read"),
    "config.json that is not JSON": (break_config, OSError, r"config.json' is not a valid JSON file"),
    "no config.json": (
        lambda folder: (folder / "config.json").unlink(),
        (OSError, ValueError),
        r"has no config.json|Should have a `model_type` key in its config.json",
    ),
    "unknown fusion in config.json": (set_config(fusion="middle"), ValueError, r"`fusion` must be one of"),
    "video_feature_size 0 in config.json": (
        set_config(video_feature_size=0),
        ValueError,
        r"`video_feature_size` must be a positive integer",
    ),
    # transformers would leave the second layers random with a log line: the model run would not be the one saved.
    "a config promising more layers than the weights hold": (
        set_config(num_layers=3, num_decoder_layers=3),
        OSError,
        r"do not match its config: \d+ missing \(decoder.block.\d",
    ),
    # The Auto classes find no "llama" model with FIBER's auto_map: they ask for trust_remote_code.
    "another architecture's config.json": (
        set_config(model_type="llama"),
        ValueError,
        r"holds a 'llama' model: a FIBER model starts from a FIBER or T5 checkpoint"
        r"|contains custom code which must be executed",
    ),
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


def test_turning_safetensors_off_is_refused(tmp_path, make_model):
    make_model("none").save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="FIBER models load from safetensors only"):
        FiberT5ForConditionalGeneration.from_pretrained(tmp_path, use_safetensors=False)


def test_a_saved_model_with_its_processor_still_loads(tmp_path, make_model, processor):
    """The control for the cases above: the unspoiled folder loads and answers."""
    make_model("none").save_pretrained(tmp_path)
    shutil.copytree(processor.tokenizer.name_or_path, tmp_path / "tokenizer")
    model = AutoModelForSeq2SeqLM.from_pretrained(tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "tokenizer")
    assert len(model.fill_blanks(FiberProcessor(tokenizer), [CAPTION], only_noun_phrases=False)) == 1
