"""Tiny random models of every kind `fiberbench predict` runs: for its tests, benchmarks and the docs' examples.

Built offline in seconds from the tokenizer shipped with the package (`SAMPLE_TOKENIZER_PATH`), with
a fixed seed: a T5 seq2seq LM, a Llama causal LM with a chat template, this project's early-fusion
model, and a LLaVA video-language model (CLIP vision tower, Llama text model) whose processor reads
a clip's frames as images (`SAVERS`). Their answers are random words; what they show is that every
kind runs end to end, and how fast. The video-LLM families are in `video_families`, the synthetic
videos in `tiny_videos`.
"""

from pathlib import Path

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

from fiberbench.modeling import (
    SAMPLE_TOKENIZER_PATH,
    FiberProcessor,
    FiberT5ForConditionalGeneration,
    build_tiny_config,
)


def chat_template(image: str, video: str = "") -> str:
    """A minimal chat template, "user: ...\\nassistant:", with `image` for an image part and `video` for a video."""
    return (
        "{% for message in messages %}{{ message['role'] }}: "
        "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
        "{% for part in message['content'] %}"
        f"{{% if part['type'] == 'image' %}}{image}{{% elif part['type'] == 'video' %}}{video}"
        "{% else %}{{ part['text'] }}{% endif %}"
        "{% endfor %}{% endif %}{{ '\\n' }}{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
    )


CHAT_TEMPLATE = chat_template("<image>")  # the LLaVA's and the causal LM's: images as <image> placeholders
FRAME_SIZE = 32  # pixels; the CLIP tower reads 32x32 images in 8x8 patches: 16 tokens per frame
SEED = 0


def sample_tokenizer():
    """The tokenizer shipped with the package (`SAMPLE_TOKENIZER_PATH`), trained on the sample's captions."""
    return AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH)


def llama_fields(tokenizer, hidden_size: int, num_layers: int) -> dict:
    """A Llama text model of `hidden_size` and `num_layers` for `tokenizer` (4 heads, 2 key-value heads)."""
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": hidden_size,
        "intermediate_size": 2 * hidden_size,
        "num_hidden_layers": num_layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "bos_token_id": None,
    }


def save_seq2seq(folder: Path, d_model: int = 32, num_layers: int = 1) -> None:
    """A T5 of `d_model` with `num_layers` layers each side (4 heads), and the sample tokenizer."""
    tokenizer = sample_tokenizer()
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=d_model,
        d_kv=d_model // 4,
        d_ff=2 * d_model,
        num_layers=num_layers,
        num_heads=4,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng():
        torch.manual_seed(SEED)
        T5ForConditionalGeneration(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def save_causal(
    folder: Path, hidden_size: int = 32, num_layers: int = 1, chat_template: str | None = CHAT_TEMPLATE
) -> None:
    """A Llama of `hidden_size` with `num_layers` layers, and the sample tokenizer with `chat_template` (None: none)."""
    tokenizer = sample_tokenizer()
    tokenizer.chat_template = chat_template
    with torch.random.fork_rng():
        torch.manual_seed(SEED)
        LlamaForCausalLM(LlamaConfig(**llama_fields(tokenizer, hidden_size, num_layers))).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def save_fiber(folder: Path) -> None:
    """This project's early-fusion model (`build_tiny_config`) and its processor."""
    tokenizer = sample_tokenizer()
    with torch.random.fork_rng():
        torch.manual_seed(SEED)
        FiberT5ForConditionalGeneration(build_tiny_config(tokenizer, "early")).save_pretrained(folder)
    FiberProcessor(tokenizer).save_pretrained(folder)


def save_video(folder: Path) -> None:
    """A LLaVA (CLIP vision tower for FRAME_SIZE images, one-layer Llama) and a processor taking frames as images."""
    tokenizer = sample_tokenizer()
    tokenizer.add_tokens(["<image>"], special_tokens=True)
    vision = {"model_type": "clip_vision_model", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1}
    vision |= {"num_attention_heads": 4, "image_size": FRAME_SIZE, "patch_size": 8, "projection_dim": 32}
    config = LlavaConfig(
        vision_config=vision,
        text_config={"model_type": "llama", **llama_fields(tokenizer, hidden_size=32, num_layers=1)},
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_layer=-1,
    )
    with torch.random.fork_rng():
        torch.manual_seed(SEED)
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


# Kind -> the function that saves a tiny model of that kind into a folder.
SAVERS = {"seq2seq": save_seq2seq, "causal": save_causal, "fiber": save_fiber, "video": save_video}
