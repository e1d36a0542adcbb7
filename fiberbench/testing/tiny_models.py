"""Tiny random models of the kinds `fiberbench predict` runs, built offline in seconds with a fixed seed (`SAVERS`): a
T5 seq2seq LM, a Llama causal LM with a chat template, and a LLaVA whose processor reads frames as images (no
torchvision), all with a character-level tokenizer (`tiny_tokenizer`). Their answers are random characters."""
import string
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import (CLIPImageProcessorPil, LlamaConfig, LlamaForCausalLM, LlavaConfig,
                          LlavaForConditionalGeneration, LlavaProcessor, PreTrainedTokenizerFast, T5Config,
                          T5ForConditionalGeneration)

from .tiny_videos import FRAME_SIZE

SEED = 0


def chat_template(image: str, video: str = "") -> str:
    """A minimal chat template, "user: ...\\nassistant:", with `image` for an image part and `video` for a video."""
    return ("{% for message in messages %}{{ message['role'] }}: {% if message['content'] is string %}"
            "{{ message['content'] }}{% else %}{% for part in message['content'] %}{% if part['type'] == 'image' %}"
            f"{image}{{% elif part['type'] == 'video' %}}{video}{{% else %}}{{{{ part['text'] }}}}{{% endif %}}"
            "{% endfor %}{% endif %}{{ '\\n' }}{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}")


CHAT_TEMPLATE = chat_template("<image>")  # the LLaVA's and the causal LM's: images as <image> placeholders


def tiny_tokenizer(special_tokens=(), named: dict[str, str] | None = None) -> PreTrainedTokenizerFast:
    """A character-level tokenizer of printable ASCII (any other character is <unk>; spaces as SentencePiece's "▁",
    so that text decodes as it was) with T5's <pad>, </s>, <unk> and sentinels <extra_id_0>...<extra_id_99>, and the
    `special_tokens` and `named` ones (InternVL finds its tokens by name)."""
    characters = ["<pad>", "</s>", "<unk>", "▁", *(c for c in string.printable if not c.isspace())]
    pieces = Tokenizer(models.BPE({piece: index for index, piece in enumerate(characters)}, [], unk_token="<unk>"))
    pieces.pre_tokenizer, pieces.decoder = pre_tokenizers.Metaspace(), decoders.Metaspace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=pieces, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                                        extra_special_tokens=named or {})
    sentinels = [f"<extra_id_{index}>" for index in range(100)]
    tokenizer.add_tokens([*sentinels, *special_tokens, *(named or {}).values()], special_tokens=True)
    return tokenizer


def frame_sizes(size: int) -> dict:
    """An image processor's sizes: the short side resized to `size`, its centre square cropped (as CLIP's)."""
    return {"size": {"shortest_edge": size}, "crop_size": {"height": size, "width": size}}


def llama_fields(tokenizer, hidden_size: int, num_layers: int) -> dict:
    """A Llama text model of `hidden_size` and `num_layers` for `tokenizer` (4 heads, 2 key-value heads)."""
    return {"vocab_size": len(tokenizer), "hidden_size": hidden_size, "intermediate_size": 2 * hidden_size,
            "num_hidden_layers": num_layers, "num_attention_heads": 4, "num_key_value_heads": 2,
            "pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id, "bos_token_id": None}


def save_seeded(folder: Path, build, *savable) -> None:
    """`build()` (a model, or a model and its processor) with the fixed seed, saved in `folder` with `savable`."""
    with torch.random.fork_rng():
        torch.manual_seed(SEED)
        built = build()
    for item in (*(built if isinstance(built, tuple) else (built,)), *savable):
        item.save_pretrained(folder)


def save_seq2seq(folder: Path, d_model: int = 32, num_layers: int = 1) -> None:
    """A T5 of `d_model` with `num_layers` layers each side (4 heads)."""
    tokenizer = tiny_tokenizer()
    config = T5Config(vocab_size=len(tokenizer), d_model=d_model, d_kv=d_model // 4, d_ff=2 * d_model,
                      num_layers=num_layers, num_heads=4, decoder_start_token_id=tokenizer.pad_token_id)
    save_seeded(folder, lambda: T5ForConditionalGeneration(config), tokenizer)


def save_causal(folder: Path, hidden_size: int = 32, num_layers: int = 1, chat_template: str | None = CHAT_TEMPLATE):
    """A Llama of `hidden_size` with `num_layers` layers, its tokenizer with `chat_template` (None: none)."""
    tokenizer = tiny_tokenizer()
    tokenizer.chat_template = chat_template
    config = LlamaConfig(**llama_fields(tokenizer, hidden_size, num_layers))
    save_seeded(folder, lambda: LlamaForCausalLM(config), tokenizer)


def save_video(folder: Path) -> None:
    """A LLaVA (CLIP vision tower, one-layer Llama) reading frames as images through CLIP's PIL image processor."""
    tokenizer = tiny_tokenizer(["<image>"])
    vision = {"model_type": "clip_vision_model", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
              "num_attention_heads": 4, "image_size": FRAME_SIZE, "patch_size": 8, "projection_dim": 32}
    config = LlavaConfig(vision_config=vision, text_config={"model_type": "llama", **llama_fields(tokenizer, 32, 1)},
                         image_token_id=tokenizer.convert_tokens_to_ids("<image>"), vision_feature_layer=-1)
    processor = LlavaProcessor(image_processor=CLIPImageProcessorPil(**frame_sizes(FRAME_SIZE)), tokenizer=tokenizer,
                               patch_size=8, chat_template=CHAT_TEMPLATE, vision_feature_select_strategy="default",
                               num_additional_image_tokens=1)  # CLIP's class token
    save_seeded(folder, lambda: LlavaForConditionalGeneration(config), processor)


SAVERS = {"seq2seq": save_seq2seq, "causal": save_causal, "video": save_video}
