"""Tiny random video-language models of nine families, built from their configs offline (their video processors
need torchvision): two text layers of 64, two vision layers of 32, the family's special tokens in a tiny tokenizer,
its own image and video processors at tiny sizes, and a minimal chat template writing its placeholders."""

from pathlib import Path

import transformers as t

from .tiny_models import chat_template, frame_sizes, llama_fields, save_seeded, tiny_tokenizer
from .tiny_videos import FRAME_SIZE

TEXT, VISION, LAYERS = 64, 32, 2  # widths and depth
FRAME = {"height": FRAME_SIZE, "width": FRAME_SIZE}
ONE_TILE = [[FRAME_SIZE, FRAME_SIZE]]  # one grid, the frame itself: no high-resolution tiles
QWEN = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")
# Qwen's text rotary embedding is split over time, height and width (M-RoPE): 8 = half a head of 16.
QWEN_ROPE = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}
GLM = ("<|image|>", "<|video|>", "<|begin_of_image|>", "<|end_of_image|>", "<|begin_of_video|>", "<|end_of_video|>")
INTERNVL = {"start_image_token": "<img>", "end_image_token": "</img>", "context_image_token": "<IMG_CONTEXT>",
            "video_token": "<video>"}  # InternVL's processor finds its tokens by these names
SMOLVLM = ("<image>", "<video>", "<fake_token_around_image>", "<global-img>", "<end_of_utterance>")


def text(tokenizer, **fields) -> dict:
    return llama_fields(tokenizer, TEXT, LAYERS) | fields


def tower(**fields) -> dict:
    """A vision tower reading FRAME_SIZE frames in 8x8 patches."""
    return {"hidden_size": VISION, "intermediate_size": 2 * VISION, "num_hidden_layers": LAYERS,
            "num_attention_heads": 4, "image_size": FRAME_SIZE, "patch_size": 8, **fields}


def qwen_vision(**fields) -> dict:
    return {"depth": LAYERS, "hidden_size": VISION, "intermediate_size": 2 * VISION, "num_heads": 4,
            "out_hidden_size": TEXT, **fields}


def ids(tokenizer, names: tuple, tokens: tuple, suffix: str = "_token_id") -> dict:
    """The config fields `{name}{suffix}` of `tokens`."""
    return {f"{name}{suffix}": id_ for name, id_ in zip(names, tokenizer.convert_tokens_to_ids(list(tokens)))}


def qwen_processors(image: str, video: str, patch_size: int = 14) -> tuple:
    """Image and video processors keeping FRAME_SIZE frames at their size (whole 2x2 patches, a token each), room for
    768 frames (Qwen3-VL's and GLM-4.1V's budget a whole video's pixels)."""
    size = {"shortest_edge": (2 * patch_size) ** 2, "longest_edge": 768 * FRAME_SIZE**2}
    return getattr(t, image)(size=size, patch_size=patch_size), getattr(t, video)(size=size, patch_size=patch_size)


def qwen(name: str, vision: dict, rope=QWEN_ROPE, patch: int = 14, video="Qwen2VLVideoProcessor", **fields):
    """A Qwen-style family (`name`: Qwen2VL, Qwen2_5_VL, Qwen3VL), of its config, model and processor classes."""
    def build(tokenizer):
        token_ids = ids(tokenizer, ("vision_start", "vision_end", "image", "video"), QWEN)
        config = getattr(t, f"{name}Config")(text_config=text(tokenizer, rope_parameters=rope, **fields),
                                             vision_config=vision, **token_ids)
        image_processor, video_processor = qwen_processors("Qwen2VLImageProcessor", video, patch)
        template = chat_template(f"{QWEN[0]}{QWEN[2]}{QWEN[1]}", f"{QWEN[0]}{QWEN[3]}{QWEN[1]}")
        processor = getattr(t, f"{name}Processor")(image_processor, tokenizer, video_processor, chat_template=template)
        return getattr(t, f"{name}ForConditionalGeneration")(config), processor
    return build, QWEN, None


def llava(name: str, tower_type: str, text_type: str, processors, **fields):
    """A LLaVA family (`name`: LlavaOnevision, LlavaNextVideo, VideoLlava): placeholders <image> and <video>, the last
    vision layer's features; `processors()` gives its image and video processors and their settings."""
    def build(tokenizer):
        token_ids = ids(tokenizer, ("image", "video"), ("<image>", "<video>"), "_token_index")
        config = getattr(t, f"{name}Config")(vision_config=tower(model_type=tower_type), vision_feature_layer=-1,
                                             text_config={"model_type": text_type, **text(tokenizer)}, **token_ids,
                                             **fields)
        template = chat_template("<image>", "<video>")
        processor = getattr(t, f"{name}Processor")(tokenizer=tokenizer, chat_template=template, **processors())
        return getattr(t, f"{name}ForConditionalGeneration")(config), processor
    return build, ("<image>", "<video>"), None


def clip_processors(image, video, **fields) -> dict:
    """A CLIP-tower family's processors: frames' short side at FRAME_SIZE, centre-cropped; CLIP's class token."""
    sizes = frame_sizes(FRAME_SIZE)
    return {"image_processor": image(**sizes, **fields), "video_processor": video(**sizes), "patch_size": 8,
            "vision_feature_select_strategy": "default", "num_additional_image_tokens": 1}


def build_smolvlm(tokenizer):
    config = t.SmolVLMConfig(vision_config=tower(), text_config={"model_type": "llama", **text(tokenizer)},
                             image_token_id=tokenizer.convert_tokens_to_ids("<image>"), scale_factor=2)
    size = {"longest_edge": FRAME_SIZE}  # SmolVLM's defaults upscale a frame to 1456 px and tile it: seconds a clip
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
        image_processor=t.GotOcr2ImageProcessor(size=FRAME, crop_to_patches=False), tokenizer=tokenizer,
        video_processor=t.InternVLVideoProcessor(size=FRAME), image_seq_length=image_seq_length,
        chat_template=chat_template("<IMG_CONTEXT>", "<video>"))
    return t.InternVLForConditionalGeneration(config), processor


def build_glm4v(tokenizer):
    # GLM rotates half of each head of 16 (partial_rotary_factor), split over time, height and width.
    rope = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5, "mrope_section": [1, 1, 2]}
    token_ids = ids(tokenizer, ("image", "video", "image_start", "image_end", "video_start", "video_end"), GLM)
    config = t.Glm4vConfig(text_config=text(tokenizer, rope_parameters=rope),
                           vision_config=qwen_vision(image_size=28, patch_size=14), **token_ids)
    image, video = qwen_processors("Glm4vImageProcessor", "Glm4vVideoProcessor")
    template = chat_template(f"{GLM[2]}{GLM[0]}{GLM[3]}", f"{GLM[4]}{GLM[1]}{GLM[5]}")
    return t.Glm4vForConditionalGeneration(config), t.Glm4vProcessor(image, tokenizer, video, chat_template=template)


# Family (its config's model type) -> (builder, its special tokens, the tokens InternVL finds by name).
VIDEO_FAMILIES = {
    "qwen2_vl": qwen("Qwen2VL", {"depth": LAYERS, "embed_dim": VISION, "hidden_size": TEXT, "num_heads": 4}),
    "qwen2_5_vl": qwen("Qwen2_5_VL", qwen_vision(fullatt_block_indexes=[LAYERS - 1], window_size=56)),
    "qwen3_vl": qwen("Qwen3VL", qwen_vision(patch_size=16, num_position_embeddings=16, deepstack_visual_indexes=[1]),
                     QWEN_ROPE | {"mrope_interleaved": True}, 16, "Qwen3VLVideoProcessor", head_dim=16),
    "llava_onevision": llava("LlavaOnevision", "siglip_vision_model", "qwen2", lambda: {
        "image_processor": t.LlavaOnevisionImageProcessor(size=FRAME, image_grid_pinpoints=ONE_TILE),
        "video_processor": t.LlavaOnevisionVideoProcessor(size=FRAME), "num_image_tokens": (FRAME_SIZE // 8) ** 2,
        "vision_feature_select_strategy": "full"}, image_grid_pinpoints=ONE_TILE),
    "llava_next_video": llava("LlavaNextVideo", "clip_vision_model", "llama", lambda: clip_processors(
        t.LlavaNextImageProcessor, t.LlavaNextVideoVideoProcessor, image_grid_pinpoints=ONE_TILE),
        image_grid_pinpoints=ONE_TILE),
    "video_llava": llava("VideoLlava", "clip_vision_model", "llama",
                         lambda: clip_processors(t.VideoLlavaImageProcessor, t.VideoLlavaVideoProcessor)),
    "smolvlm": (build_smolvlm, SMOLVLM, None),
    "internvl": (build_internvl, (), INTERNVL),
    "glm4v": (build_glm4v, GLM, None),
}


def save_video_family(family: str, folder: Path) -> None:
    """A tiny random model of a video-LLM `family` (a key of `VIDEO_FAMILIES`) and its processor, saved in `folder`."""
    build, tokens, named = VIDEO_FAMILIES[family]
    save_seeded(folder, lambda: build(tiny_tokenizer(tokens, named)))
