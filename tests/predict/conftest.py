"""Tiny random models of every kind `fiberbench predict` runs, saved as on the Hub, and synthetic videos.

Built once per session, offline, from the tokenizer shipped with the package: a T5 seq2seq LM, a
Llama causal LM with a chat template, this project's early-fusion model, and a LLaVA
video-language model (CLIP vision tower, Llama text model) whose processor reads frames as images.
"""

import json

import numpy as np
import pytest
import torch
from transformers import (
    AutoTokenizer,
    CLIPImageProcessorPil,
    LlamaConfig,
    LlamaForCausalLM,
    LlavaConfig,
    LlavaForConditionalGeneration,
    LlavaProcessor,
    T5Config,
    T5ForConditionalGeneration,
)

from fiberbench.data import SAMPLE_DIR
from fiberbench.data.fiber.validation import clip_id
from fiberbench.modeling import (
    SAMPLE_TOKENIZER_PATH,
    FiberProcessor,
    FiberT5ForConditionalGeneration,
    build_tiny_config,
)

# A minimal chat template: "user: ...\nassistant:", images as <image> placeholders.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: "
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>{% else %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}{{ '\\n' }}{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
)
LLAMA_SIZES = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4}
LLAMA_SIZES |= {"num_key_value_heads": 2}
FRAME_SIZE = 32  # pixels; the CLIP tower reads 32x32 images in 8x8 patches: 16 tokens per frame


def sample_tokenizer():
    return AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH)


def save_seq2seq(folder):
    tokenizer = sample_tokenizer()
    config = T5Config(vocab_size=len(tokenizer), d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4)
    config.decoder_start_token_id = tokenizer.pad_token_id
    T5ForConditionalGeneration(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def save_causal(folder, chat_template=CHAT_TEMPLATE):
    tokenizer = sample_tokenizer()
    tokenizer.chat_template = chat_template
    special = {"pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id, "bos_token_id": None}
    LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), **LLAMA_SIZES, **special)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def save_fiber(folder):
    tokenizer = sample_tokenizer()
    FiberT5ForConditionalGeneration(build_tiny_config(tokenizer, "early")).save_pretrained(folder)
    FiberProcessor(tokenizer).save_pretrained(folder)


def save_video(folder):
    tokenizer = sample_tokenizer()
    tokenizer.add_tokens(["<image>"], special_tokens=True)
    vision = {"model_type": "clip_vision_model", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1}
    vision |= {"num_attention_heads": 4, "image_size": FRAME_SIZE, "patch_size": 8, "projection_dim": 32}
    text = {"model_type": "llama", "vocab_size": len(tokenizer), **LLAMA_SIZES}
    text |= {"pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id, "bos_token_id": None}
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_layer=-1,
    )
    LlavaForConditionalGeneration(config).save_pretrained(folder)
    # CLIP's slow (PIL) image processor: the default one needs torchvision. One extra token per
    # image (CLIP's class token), dropped by the "default" feature selection.
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": FRAME_SIZE}, crop_size={"height": FRAME_SIZE, "width": FRAME_SIZE}
    )
    LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=CHAT_TEMPLATE,
    ).save_pretrained(folder)


SAVERS = {"seq2seq": save_seq2seq, "causal": save_causal, "fiber": save_fiber, "video": save_video}


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """Kind -> the folder of a tiny random model of that kind (fixed seed)."""
    root = tmp_path_factory.mktemp("tiny_models")
    folders = {}
    for kind, save in SAVERS.items():
        torch.manual_seed(0)
        folders[kind] = root / kind
        save(folders[kind])
    return folders


def write_video(path, seconds: float, fps: int, size: int = FRAME_SIZE, level=lambda index: 10 * index % 250):
    """A silent H.264 video whose frame `index` is a flat grey of `level(index)`, losslessly encoded."""
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps, options={"qp": "0"})
        stream.width = stream.height = size
        stream.pix_fmt = "yuv420p"
        for index in range(round(seconds * fps)):
            image = np.full((size, size, 3), level(index), dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def sample_test_records() -> list[dict]:
    return json.loads((SAMPLE_DIR / "test.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def video_dir(tmp_path_factory):
    """Videos for every test clip of the bundled sample: even clips as clip files, odd ones as whole videos."""
    folder = tmp_path_factory.mktemp("videos")
    for index, record in enumerate(sample_test_records()):
        video_id, start, end = record["video_id"], record["video_start_time"], record["video_end_time"]
        if index % 2 == 0:
            write_video(folder / f"{clip_id(video_id, start, end)}.mp4", seconds=end - start, fps=2)
        else:
            write_video(folder / f"{video_id}.mp4", seconds=end + 1, fps=1)
    return folder


EVALUATE_FIELDS = {"video_id": str, "video_start_time": int, "video_end_time": int, "prediction": str}


def read_evaluate_format(path, num_beams: int) -> list[dict]:
    """The rows of a predictions file, checked against the format `fiberbench evaluate` reads.

    JSON Lines; each row exactly `video_id`, `video_start_time`, `video_end_time`, `prediction`
    (a string) and, with several beams, `candidates` (a list of strings holding the prediction).
    """
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        assert set(row) == set(EVALUATE_FIELDS) | ({"candidates"} if num_beams > 1 else set()), row
        for field, kind in EVALUATE_FIELDS.items():
            assert type(row[field]) is kind, (field, row)
        if num_beams > 1:
            assert (
                all(type(candidate) is str for candidate in row["candidates"]) and len(row["candidates"]) <= num_beams
            )
            assert row["prediction"] in row["candidates"] or row["candidates"] == []
    return rows


def clip_keys(records) -> list[tuple]:
    return [(record["video_id"], record["video_start_time"], record["video_end_time"]) for record in records]
