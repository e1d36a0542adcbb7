"""Tiny random video-language models of nine families, built from their configs offline: for tests and benchmarks.

One model of each family in `VIDEO_FAMILIES` (two text layers of 64, two vision layers of 32;
their processors have video processors, which need torchvision). Each family's processor gets the
family's special tokens added to the sample tokenizer, the family's own image and video processors
at tiny sizes, and a minimal chat template that writes the family's image and video placeholders.

    python -m fiberbench.testing model qwen2_5_vl tiny-qwen2.5-vl   # a tiny model (offline)
"""

from pathlib import Path

import torch
from transformers import AutoTokenizer

from fiberbench.modeling import SAMPLE_TOKENIZER_PATH

from .tiny_models import FRAME_SIZE, SEED, chat_template, llama_fields

# The video-LLM families below. Each builds from its config and the sample tokenizer with the
# family's special tokens; frames are read at FRAME_SIZE (or the smallest size the family's
# vision tower takes).
TEXT_SIZE, VISION_SIZE, NUM_LAYERS = 64, 32, 2


def _family_tokenizer(tokens: list[str], named: dict[str, str] | None = None):
    """The sample tokenizer with the family's special `tokens`, and `named` ones (InternVL finds its tokens by name)."""
    tokenizer = AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH, extra_special_tokens=named or {})
    tokenizer.add_tokens([*tokens, *(named or {}).values()], special_tokens=True)
    return tokenizer


def _text_config(tokenizer, **fields) -> dict:
    return llama_fields(tokenizer, TEXT_SIZE, NUM_LAYERS) | fields


def _vision_tower(model_type: str) -> dict:
    """A CLIP or SigLIP vision tower reading FRAME_SIZE frames in 8x8 patches."""
    return {
        "model_type": model_type,
        "hidden_size": VISION_SIZE,
        "intermediate_size": 2 * VISION_SIZE,
        "num_hidden_layers": NUM_LAYERS,
        "num_attention_heads": 4,
        "image_size": FRAME_SIZE,
        "patch_size": 8,
    }


QWEN_TOKENS = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
QWEN_TEMPLATE = chat_template(
    "<|vision_start|><|image_pad|><|vision_end|>", "<|vision_start|><|video_pad|><|vision_end|>"
)
# Qwen's text rotary embedding is split over time, height and width (M-RoPE): 8 = half a head of 16.
QWEN_ROPE = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}


def _qwen_token_ids(tokenizer) -> dict:
    ids = dict(zip(QWEN_TOKENS, tokenizer.convert_tokens_to_ids(QWEN_TOKENS)))
    return {
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
    }


def _qwen_processors(image_class, video_class, patch_size: int = 14):
    """Qwen-style image and video processors that keep FRAME_SIZE frames at their size (rounded to whole 2x2 patches,
    which one token covers): neither path upscales, so both read the same pixels. Qwen3-VL's and GLM-4.1V's video
    processors budget the pixels of a whole video, hence room for 768 frames."""
    size = {"shortest_edge": (2 * patch_size) ** 2, "longest_edge": 768 * FRAME_SIZE**2}
    return image_class(size=size, patch_size=patch_size), video_class(size=size, patch_size=patch_size)


def _build_qwen(tokenizer, classes: tuple, vision: dict, text: dict, patch_size: int = 14):
    """A Qwen-style model (M-RoPE text model, merged vision tokens) and its processor, from its family's `classes`:
    config, model, processor, image processor and video processor."""
    config_class, model_class, processor_class, image_class, video_class = classes
    config = config_class(text_config=text, vision_config=vision, **_qwen_token_ids(tokenizer))
    image, video = _qwen_processors(image_class, video_class, patch_size)
    return model_class(config), processor_class(image, tokenizer, video, chat_template=QWEN_TEMPLATE)


def build_qwen2_vl(tokenizer):
    import transformers as t

    classes = (t.Qwen2VLConfig, t.Qwen2VLForConditionalGeneration, t.Qwen2VLProcessor, t.Qwen2VLImageProcessor)
    vision = {"depth": NUM_LAYERS, "embed_dim": VISION_SIZE, "hidden_size": TEXT_SIZE, "num_heads": 4}
    text = _text_config(tokenizer, rope_parameters=QWEN_ROPE)
    return _build_qwen(tokenizer, (*classes, t.Qwen2VLVideoProcessor), vision, text)


def build_qwen2_5_vl(tokenizer):
    import transformers as t

    classes = (t.Qwen2_5_VLConfig, t.Qwen2_5_VLForConditionalGeneration, t.Qwen2_5_VLProcessor)
    vision = {"depth": NUM_LAYERS, "hidden_size": VISION_SIZE, "intermediate_size": 2 * VISION_SIZE, "num_heads": 4}
    vision |= {"out_hidden_size": TEXT_SIZE, "fullatt_block_indexes": [NUM_LAYERS - 1], "window_size": 56}
    text = _text_config(tokenizer, rope_parameters=QWEN_ROPE)
    return _build_qwen(tokenizer, (*classes, t.Qwen2VLImageProcessor, t.Qwen2VLVideoProcessor), vision, text)


def build_qwen3_vl(tokenizer):
    import transformers as t

    classes = (t.Qwen3VLConfig, t.Qwen3VLForConditionalGeneration, t.Qwen3VLProcessor)
    vision = {"depth": NUM_LAYERS, "hidden_size": VISION_SIZE, "intermediate_size": 2 * VISION_SIZE, "num_heads": 4}
    vision |= {"out_hidden_size": TEXT_SIZE, "patch_size": 16, "num_position_embeddings": 16}
    vision |= {"deepstack_visual_indexes": [NUM_LAYERS - 1]}
    text = _text_config(tokenizer, head_dim=16, rope_parameters=QWEN_ROPE | {"mrope_interleaved": True})
    classes = (*classes, t.Qwen2VLImageProcessor, t.Qwen3VLVideoProcessor)
    return _build_qwen(tokenizer, classes, vision, text, patch_size=16)


LLAVA_TOKENS = ["<image>", "<video>"]
LLAVA_TEMPLATE = chat_template("<image>", "<video>")
FRAME = {"height": FRAME_SIZE, "width": FRAME_SIZE}
# One grid (the frame itself): no high-resolution tiles.
ONE_TILE = [[FRAME_SIZE, FRAME_SIZE]]
# The image and video processors of the CLIP-tower families: the shortest edge at FRAME_SIZE, centre-cropped square.
CLIP_FRAME = {"size": {"shortest_edge": FRAME_SIZE}, "crop_size": FRAME}


def _llava_fields(tokenizer, vision_tower: str, text_model: str) -> dict:
    """The config fields of the LLaVA families: a `vision_tower` (model type), a `text_model` (model type), the last
    vision layer's features, and the ids of the image and video placeholders."""
    image, video = tokenizer.convert_tokens_to_ids(LLAVA_TOKENS)
    return {
        "vision_config": _vision_tower(vision_tower),
        "text_config": {"model_type": text_model, **_text_config(tokenizer)},
        "vision_feature_layer": -1,
        "image_token_index": image,
        "video_token_index": video,
    }


def build_llava_onevision(tokenizer):
    from transformers import (
        LlavaOnevisionConfig,
        LlavaOnevisionForConditionalGeneration,
        LlavaOnevisionImageProcessor,
        LlavaOnevisionProcessor,
        LlavaOnevisionVideoProcessor,
    )

    config = LlavaOnevisionConfig(
        **_llava_fields(tokenizer, "siglip_vision_model", "qwen2"), image_grid_pinpoints=ONE_TILE
    )
    processor = LlavaOnevisionProcessor(
        image_processor=LlavaOnevisionImageProcessor(size=FRAME, image_grid_pinpoints=ONE_TILE),
        video_processor=LlavaOnevisionVideoProcessor(size=FRAME),
        tokenizer=tokenizer,
        num_image_tokens=(FRAME_SIZE // 8) ** 2,
        vision_feature_select_strategy="full",
        chat_template=LLAVA_TEMPLATE,
    )
    return LlavaOnevisionForConditionalGeneration(config), processor


def build_llava_next_video(tokenizer):
    from transformers import (
        LlavaNextImageProcessor,
        LlavaNextVideoConfig,
        LlavaNextVideoForConditionalGeneration,
        LlavaNextVideoProcessor,
        LlavaNextVideoVideoProcessor,
    )

    config = LlavaNextVideoConfig(
        **_llava_fields(tokenizer, "clip_vision_model", "llama"), image_grid_pinpoints=ONE_TILE
    )
    processor = LlavaNextVideoProcessor(
        video_processor=LlavaNextVideoVideoProcessor(**CLIP_FRAME),
        image_processor=LlavaNextImageProcessor(**CLIP_FRAME, image_grid_pinpoints=ONE_TILE),
        tokenizer=tokenizer,
        chat_template=LLAVA_TEMPLATE,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,  # CLIP's class token
    )
    return LlavaNextVideoForConditionalGeneration(config), processor


def build_video_llava(tokenizer):
    from transformers import (
        VideoLlavaConfig,
        VideoLlavaForConditionalGeneration,
        VideoLlavaImageProcessor,
        VideoLlavaProcessor,
        VideoLlavaVideoProcessor,
    )

    config = VideoLlavaConfig(**_llava_fields(tokenizer, "clip_vision_model", "llama"))
    processor = VideoLlavaProcessor(
        image_processor=VideoLlavaImageProcessor(**CLIP_FRAME),
        video_processor=VideoLlavaVideoProcessor(**CLIP_FRAME),
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=LLAVA_TEMPLATE,
    )
    return VideoLlavaForConditionalGeneration(config), processor


SMOLVLM_TOKENS = ["<image>", "<video>", "<fake_token_around_image>", "<global-img>", "<end_of_utterance>"]


def build_smolvlm(tokenizer):
    from transformers import (
        SmolVLMConfig,
        SmolVLMForConditionalGeneration,
        SmolVLMImageProcessor,
        SmolVLMProcessor,
        SmolVLMVideoProcessor,
    )

    vision = _vision_tower("smolvlm_vision")
    config = SmolVLMConfig(
        vision_config={key: value for key, value in vision.items() if key != "model_type"},
        text_config={"model_type": "llama", **_text_config(tokenizer)},
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        scale_factor=2,
    )
    # Frames stay at FRAME_SIZE: SmolVLM's defaults upscale each to 1456 px and tile it (seconds a clip on CPU).
    size = {"longest_edge": FRAME_SIZE}
    processor = SmolVLMProcessor(
        image_processor=SmolVLMImageProcessor(size=size, max_image_size=size, do_image_splitting=False),
        video_processor=SmolVLMVideoProcessor(size=size, max_image_size=size),
        tokenizer=tokenizer,
        image_seq_len=(FRAME_SIZE // 8 // 2) ** 2,  # patches per side, merged 2 by 2 (scale_factor)
        chat_template=chat_template("<image>", "<video>"),
    )
    return SmolVLMForConditionalGeneration(config), processor


# InternVL's processor finds its tokens by these names on the tokenizer.
INTERNVL_TOKENS = {
    "start_image_token": "<img>",
    "end_image_token": "</img>",
    "context_image_token": "<IMG_CONTEXT>",
    "video_token": "<video>",
}


def build_internvl(tokenizer):
    from transformers import (
        GotOcr2ImageProcessor,
        InternVLConfig,
        InternVLForConditionalGeneration,
        InternVLProcessor,
        InternVLVideoProcessor,
    )

    vision = _vision_tower("internvl_vision")
    image_seq_length = (FRAME_SIZE // 8 // 2) ** 2  # patches per side, halved (downsample_ratio 0.5)
    config = InternVLConfig(
        vision_config={key: value for key, value in vision.items() if key != "model_type"},
        text_config={"model_type": "qwen2", **_text_config(tokenizer)},
        image_token_id=tokenizer.convert_tokens_to_ids("<IMG_CONTEXT>"),
        image_seq_length=image_seq_length,
        downsample_ratio=0.5,
    )
    processor = InternVLProcessor(
        image_processor=GotOcr2ImageProcessor(size=FRAME, crop_to_patches=False),
        video_processor=InternVLVideoProcessor(size=FRAME),
        tokenizer=tokenizer,
        image_seq_length=image_seq_length,
        chat_template=chat_template("<IMG_CONTEXT>", "<video>"),
    )
    return InternVLForConditionalGeneration(config), processor


GLM4V_TOKENS = [
    "<|image|>",
    "<|video|>",
    "<|begin_of_image|>",
    "<|end_of_image|>",
    "<|begin_of_video|>",
    "<|end_of_video|>",
]


def build_glm4v(tokenizer):
    from transformers import (
        Glm4vConfig,
        Glm4vForConditionalGeneration,
        Glm4vImageProcessor,
        Glm4vProcessor,
        Glm4vVideoProcessor,
    )

    ids = dict(zip(GLM4V_TOKENS, tokenizer.convert_tokens_to_ids(GLM4V_TOKENS)))
    # GLM rotates half of each head of 16 (partial_rotary_factor), split over time, height and width.
    rope = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5, "mrope_section": [1, 1, 2]}
    vision = {"depth": NUM_LAYERS, "hidden_size": VISION_SIZE, "intermediate_size": 2 * VISION_SIZE, "num_heads": 4}
    vision |= {"out_hidden_size": TEXT_SIZE, "image_size": 28, "patch_size": 14}
    config = Glm4vConfig(
        text_config=_text_config(tokenizer, rope_parameters=rope),
        vision_config=vision,
        image_token_id=ids["<|image|>"],
        video_token_id=ids["<|video|>"],
        image_start_token_id=ids["<|begin_of_image|>"],
        image_end_token_id=ids["<|end_of_image|>"],
        video_start_token_id=ids["<|begin_of_video|>"],
        video_end_token_id=ids["<|end_of_video|>"],
    )
    image, video = _qwen_processors(Glm4vImageProcessor, Glm4vVideoProcessor)
    template = chat_template(
        "<|begin_of_image|><|image|><|end_of_image|>", "<|begin_of_video|><|video|><|end_of_video|>"
    )
    return Glm4vForConditionalGeneration(config), Glm4vProcessor(image, tokenizer, video, chat_template=template)


# Family (the model type of its config) -> (builder, its special tokens, tokens InternVL finds by name).
VIDEO_FAMILIES = {
    "qwen2_vl": (build_qwen2_vl, QWEN_TOKENS, None),
    "qwen2_5_vl": (build_qwen2_5_vl, QWEN_TOKENS, None),
    "qwen3_vl": (build_qwen3_vl, QWEN_TOKENS, None),
    "llava_onevision": (build_llava_onevision, LLAVA_TOKENS, None),
    "llava_next_video": (build_llava_next_video, LLAVA_TOKENS, None),
    "video_llava": (build_video_llava, LLAVA_TOKENS, None),
    "smolvlm": (build_smolvlm, SMOLVLM_TOKENS, None),
    "internvl": (build_internvl, [], INTERNVL_TOKENS),
    "glm4v": (build_glm4v, GLM4V_TOKENS, None),
}


def save_video_family(family: str, folder: Path) -> None:
    """A tiny random model of a video-LLM `family` (a key of `VIDEO_FAMILIES`) and its processor, saved in `folder`."""
    build, tokens, named = VIDEO_FAMILIES[family]
    with torch.random.fork_rng():
        torch.manual_seed(SEED)
        model, processor = build(_family_tokenizer(tokens, named))
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
