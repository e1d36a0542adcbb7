"""Random encoders for `fiberbench extract-features` (what it does does not depend on the weights), built offline: a
CLIP image encoder (its vision tower, or a whole dual encoder) and a VideoMAE video encoder, with their PIL/NumPy
processors (no torchvision), tiny (`TINY_*`) or of real size (`BASE_*`: ViT-B/16, VideoMAE-base)."""

from pathlib import Path

from transformers import (CLIPConfig, CLIPImageProcessorPil, CLIPModel, CLIPVisionConfig, CLIPVisionModel,
                          VideoMAEConfig, VideoMAEImageProcessorPil, VideoMAEModel)

from .tiny_models import frame_sizes, save_seeded

# Tiny: 32 x 32 frames in 8 x 8 patches, 2 layers; D = 48 (the tower), 24 (CLIP's projection), 40 (VideoMAE).
TINY_CLIP = {"hidden_size": 48, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
             "image_size": 32, "patch_size": 8}
TINY_PROJECTION = 24
TINY_VIDEOMAE = TINY_CLIP | {"hidden_size": 40, "intermediate_size": 80, "num_frames": 4, "tubelet_size": 2}
# Real size: their configs' defaults (CLIP ViT-B/16; VideoMAE-base, 16 frames of 224 x 224 in tubelets of 2).
BASE_CLIP, BASE_VIDEOMAE = {"patch_size": 16}, {}
TEXT_TOWER = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
              "vocab_size": 64, "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 1}


def save_clip(folder: Path, vision: dict = TINY_CLIP, with_text: bool = False) -> None:
    """A random `CLIPVisionModel`, or with `with_text` a whole `CLIPModel` (read through `get_image_features`)."""
    config = CLIPVisionConfig(**vision)
    dual = CLIPConfig(text_config=TEXT_TOWER, vision_config=config.to_dict(), projection_dim=TINY_PROJECTION)
    build = (lambda: CLIPModel(dual)) if with_text else (lambda: CLIPVisionModel(config))
    save_seeded(folder, build, CLIPImageProcessorPil(**frame_sizes(config.image_size)))


def save_videomae(folder: Path, config: dict = TINY_VIDEOMAE) -> None:
    """A random `VideoMAEModel` with `VideoMAEImageProcessorPil`."""
    config = VideoMAEConfig(**config)
    save_seeded(folder, lambda: VideoMAEModel(config), VideoMAEImageProcessorPil(**frame_sizes(config.image_size)))


# Name -> what saves such an encoder, tiny: clip (D 48), clip_dual (a whole CLIP model, D 24), videomae (D 40).
SAVERS = {"clip": save_clip, "clip_dual": lambda folder: save_clip(folder, with_text=True), "videomae": save_videomae}
