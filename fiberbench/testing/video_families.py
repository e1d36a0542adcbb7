"""Tiny random video-language models of nine families, built from their configs offline (their video processors
need torchvision): two text layers of 64, two vision layers of 32, the family's special tokens in a tiny tokenizer,
its own image and video processors at tiny sizes, and a minimal chat template writing its placeholders."""

from pathlib import Path

import transformers as t

from .tiny_models import FRAME_SIZE, chat_template, llama_fields, save_seeded, tiny_tokenizer

TEXT_SIZE, VISION_SIZE, NUM_LAYERS = 64, 32, 2
FRAME = {"height": FRAME_SIZE, "width": FRAME_SIZE}
ONE_TILE = [[FRAME_SIZE, FRAME_SIZE]]  # one grid, the frame itself: no high-resolution tiles
CLIP_FRAME = {"size": {"shortest_edge": FRAME_SIZE}, "crop_size": FRAME}  # the shortest edge, centre-cropped square
QWEN_TOKENS = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
# Qwen's text rotary embedding is split over time, height and width (M-RoPE): 8 = half a head of 16.
QWEN_ROPE = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}
GLM4V_TOKENS = ["<|image|>", "<|video|>", "<|begin_of_image|>", "<|end_of_image|>", "<|begin_of_video|>", "<|end_of_video|>"]
INTERNVL_TOKENS = {"start_image_token": "<img>", "end_image_token": "</img>", "context_image_token": "<IMG_CONTEXT>",
                   "video_token": "<video>"}  # InternVL's processor finds its tokens by these names


def text(tokenizer, **fields) -> dict:
    return llama_fields(tokenizer, TEXT_SIZE, NUM_LAYERS) | fields


def tower(model_type: str | None = None) -> dict:
    """A CLIP-like vision tower reading FRAME_SIZE frames in 8x8 patches."""
    return {"hidden_size": VISION_SIZE, "intermediate_size": 2 * VISION_SIZE, "num_hidden_layers": NUM_LAYERS,
            "num_attention_heads": 4, "image_size": FRAME_SIZE, "patch_size": 8} | ({"model_type": model_type} if model_type else {})


def qwen_vision(**fields) -> dict:
    return {"depth": NUM_LAYERS, "hidden_size": VISION_SIZE, "intermediate_size": 2 * VISION_SIZE, "num_heads": 4,
            "out_hidden_size": TEXT_SIZE} | fields


def qwen_processors(image_class, video_class, patch_size: int = 14) -> tuple:
    """Image and video processors that keep FRAME_SIZE frames at their size (whole 2x2 patches, one token each), with
    room for 768 frames (Qwen3-VL's and GLM-4.1V's budget the pixels of a whole video)."""
    size = {"shortest_edge": (2 * patch_size) ** 2, "longest_edge": 768 * FRAME_SIZE**2}
    return image_class(size=size, patch_size=patch_size), video_class(size=size, patch_size=patch_size)


def qwen(name: str, vision: dict, rope: dict = QWEN_ROPE, patch_size: int = 14, video_class=t.Qwen2VLVideoProcessor,
         **text_fields):
    """A Qwen-style family (`name`: Qwen2VL, Qwen2_5_VL, Qwen3VL): its config, model and processor classes."""
    def build(tokenizer):
        ids = dict(zip(("vision_start", "vision_end", "image", "video"), tokenizer.convert_tokens_to_ids(QWEN_TOKENS)))
        config = getattr(t, f"{name}Config")(text_config=text(tokenizer, rope_parameters=rope, **text_fields),
                                             vision_config=vision, **{f"{key}_token_id": value for key, value in ids.items()})
        processors = qwen_processors(t.Qwen2VLImageProcessor, video_class, patch_size)
        template = chat_template("<|vision_start|><|image_pad|><|vision_end|>", "<|vision_start|><|video_pad|><|vision_end|>")
        processor = getattr(t, f"{name}Processor")(processors[0], tokenizer, processors[1], chat_template=template)
        return getattr(t, f"{name}ForConditionalGeneration")(config), processor
    return build, QWEN_TOKENS, None


def llava(name: str, vision_tower: str, text_model: str, processor: dict, **config_fields):
    """A LLaVA family (`name`: LlavaOnevision, LlavaNextVideo, VideoLlava): the image and video placeholders <image>
    and <video>, the last vision layer's features."""
    def build(tokenizer):
        image, video = tokenizer.convert_tokens_to_ids(["<image>", "<video>"])
        config = getattr(t, f"{name}Config")(
            vision_config=tower(vision_tower), text_config={"model_type": text_model, **text(tokenizer)},
            vision_feature_layer=-1, image_token_index=image, video_token_index=video, **config_fields)
        made = getattr(t, f"{name}Processor")(tokenizer=tokenizer, chat_template=chat_template("<image>", "<video>"),
                                               **{key: value() if callable(value) else value for key, value in processor.items()})
        return getattr(t, f"{name}ForConditionalGeneration")(config), made
    return build, ["<image>", "<video>"], None


def build_smolvlm(tokenizer):
    config = t.SmolVLMConfig(vision_config=tower(), text_config={"model_type": "llama", **text(tokenizer)},
                             image_token_id=tokenizer.convert_tokens_to_ids("<image>"), scale_factor=2)
    # Frames stay at FRAME_SIZE: SmolVLM's defaults upscale each to 1456 px and tile it (seconds a clip on CPU).
    size = {"longest_edge": FRAME_SIZE}
    processor = t.SmolVLMProcessor(
        image_processor=t.SmolVLMImageProcessor(size=size, max_image_size=size, do_image_splitting=False),
        video_processor=t.SmolVLMVideoProcessor(size=size, max_image_size=size), tokenizer=tokenizer,
        image_seq_len=(FRAME_SIZE // 16) ** 2, chat_template=chat_template("<image>", "<video>"))  # 2x2 patches merged
    return t.SmolVLMForConditionalGeneration(config), processor


def build_internvl(tokenizer):
    image_seq_length = (FRAME_SIZE // 16) ** 2  # patches per side, halved (downsample_ratio 0.5)
    config = t.InternVLConfig(vision_config=tower(), text_config={"model_type": "qwen2", **text(tokenizer)},
                              image_token_id=tokenizer.convert_tokens_to_ids("<IMG_CONTEXT>"),
                              image_seq_length=image_seq_length, downsample_ratio=0.5)
    processor = t.InternVLProcessor(
        image_processor=t.GotOcr2ImageProcessor(size=FRAME, crop_to_patches=False),
        video_processor=t.InternVLVideoProcessor(size=FRAME), tokenizer=tokenizer, image_seq_length=image_seq_length,
        chat_template=chat_template("<IMG_CONTEXT>", "<video>"))
    return t.InternVLForConditionalGeneration(config), processor


def build_glm4v(tokenizer):
    ids = dict(zip(("image", "video", "image_start", "image_end", "video_start", "video_end"),
                   tokenizer.convert_tokens_to_ids(GLM4V_TOKENS)))
    # GLM rotates half of each head of 16 (partial_rotary_factor), split over time, height and width.
    rope = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5, "mrope_section": [1, 1, 2]}
    config = t.Glm4vConfig(text_config=text(tokenizer, rope_parameters=rope),
                           vision_config=qwen_vision(image_size=28, patch_size=14),
                           **{f"{key}_token_id": value for key, value in ids.items()})
    image, video = qwen_processors(t.Glm4vImageProcessor, t.Glm4vVideoProcessor)
    template = chat_template("<|begin_of_image|><|image|><|end_of_image|>", "<|begin_of_video|><|video|><|end_of_video|>")
    return t.Glm4vForConditionalGeneration(config), t.Glm4vProcessor(image, tokenizer, video, chat_template=template)


# Family (its config's model type) -> (builder, its special tokens, tokens InternVL finds by name).
VIDEO_FAMILIES = {
    "qwen2_vl": qwen("Qwen2VL", {"depth": NUM_LAYERS, "embed_dim": VISION_SIZE, "hidden_size": TEXT_SIZE, "num_heads": 4}),
    "qwen2_5_vl": qwen("Qwen2_5_VL", qwen_vision(fullatt_block_indexes=[NUM_LAYERS - 1], window_size=56)),
    "qwen3_vl": qwen("Qwen3VL", qwen_vision(patch_size=16, num_position_embeddings=16, deepstack_visual_indexes=[1]),
                     QWEN_ROPE | {"mrope_interleaved": True}, 16, t.Qwen3VLVideoProcessor, head_dim=16),
    "llava_onevision": llava(
        "LlavaOnevision", "siglip_vision_model", "qwen2", image_grid_pinpoints=ONE_TILE,
        processor={"image_processor": lambda: t.LlavaOnevisionImageProcessor(size=FRAME, image_grid_pinpoints=ONE_TILE),
                   "video_processor": lambda: t.LlavaOnevisionVideoProcessor(size=FRAME),
                   "num_image_tokens": (FRAME_SIZE // 8) ** 2, "vision_feature_select_strategy": "full"}),
    "llava_next_video": llava(
        "LlavaNextVideo", "clip_vision_model", "llama", image_grid_pinpoints=ONE_TILE,
        processor={"image_processor": lambda: t.LlavaNextImageProcessor(**CLIP_FRAME, image_grid_pinpoints=ONE_TILE),
                   "video_processor": lambda: t.LlavaNextVideoVideoProcessor(**CLIP_FRAME), "patch_size": 8,
                   "vision_feature_select_strategy": "default", "num_additional_image_tokens": 1}),  # CLIP's class token
    "video_llava": llava(
        "VideoLlava", "clip_vision_model", "llama",
        processor={"image_processor": lambda: t.VideoLlavaImageProcessor(**CLIP_FRAME),
                   "video_processor": lambda: t.VideoLlavaVideoProcessor(**CLIP_FRAME), "patch_size": 8,
                   "vision_feature_select_strategy": "default", "num_additional_image_tokens": 1}),
    "smolvlm": (build_smolvlm, ["<image>", "<video>", "<fake_token_around_image>", "<global-img>", "<end_of_utterance>"],
                None),
    "internvl": (build_internvl, [], INTERNVL_TOKENS),
    "glm4v": (build_glm4v, GLM4V_TOKENS, None),
}


def save_video_family(family: str, folder: Path) -> None:
    """A tiny random model of a video-LLM `family` (a key of `VIDEO_FAMILIES`) and its processor, saved in `folder`."""
    build, tokens, named = VIDEO_FAMILIES[family]
    made = {}
    save_seeded(folder, lambda: made.setdefault("model", build(tiny_tokenizer(tokens, named)))[0])
    made["model"][1].save_pretrained(folder)
