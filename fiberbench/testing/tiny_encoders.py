"""Random-weight encoders saved as Hub model folders, built offline from configs: for the tests and the benchmark.

No pretrained CLIP, SigLIP or VideoMAE weights can be downloaded offline; what `extract-features`
does with an encoder does not depend on its weights. `save_clip` and `save_videomae` save a
CLIP-like image encoder (vision tower only, or with its text tower and projections) and a
VideoMAE-like video encoder with their PIL/NumPy processors (no torchvision needed), tiny by
default (`TINY_*`) or of real size (`BASE_*`, ViT-B/16 and VideoMAE-base) for the benchmark.

    python -m fiberbench.testing.tiny_encoders clip tiny-clip          # a tiny encoder, offline, in seconds
    python -m fiberbench.testing videos sample_videos                  # and videos of every clip of the sample
"""

import argparse
from pathlib import Path

import torch
from transformers import (
    CLIPConfig,
    CLIPImageProcessorPil,
    CLIPModel,
    CLIPVisionConfig,
    CLIPVisionModel,
    VideoMAEConfig,
    VideoMAEImageProcessorPil,
    VideoMAEModel,
)

SEED = 0
# Tiny: 32 x 32 frames in 8 x 8 patches, 2 layers; D = 48 (the tower), 24 (CLIP's projection), 40 (VideoMAE).
TINY_CLIP = {
    "hidden_size": 48,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "image_size": 32,
    "patch_size": 8,
}
TINY_PROJECTION = 24
TINY_VIDEOMAE = {
    "hidden_size": 40,
    "intermediate_size": 80,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "image_size": 32,
    "patch_size": 8,
    "num_frames": 4,
    "tubelet_size": 2,
}
# Real size: CLIP ViT-B/16 and VideoMAE-base (16 frames of 224 x 224, tubelets of 2): their configs' defaults.
BASE_CLIP = {"patch_size": 16}
BASE_VIDEOMAE = {}


def _processor_sizes(image_size: int) -> dict:
    """Resize the short side to the model's size, then crop its centre square (as CLIP's and VideoMAE's do)."""
    return {"size": {"shortest_edge": image_size}, "crop_size": {"height": image_size, "width": image_size}}


def save_clip(folder: Path, vision: dict = TINY_CLIP, with_text: bool = False) -> None:
    """A random CLIP image encoder: `CLIPVisionModel`, or with `with_text` a whole `CLIPModel` (a dual encoder,
    read through `get_image_features`); with `CLIPImageProcessorPil`."""
    vision_config = CLIPVisionConfig(**vision)
    with torch.random.fork_rng():
        torch.manual_seed(SEED)
        if with_text:
            text = {
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_hidden_layers": 1,
                "num_attention_heads": 4,
                "vocab_size": 64,
                "bos_token_id": 0,
                "eos_token_id": 1,
                "pad_token_id": 1,
            }
            config = CLIPConfig(text_config=text, vision_config=vision_config.to_dict(), projection_dim=TINY_PROJECTION)
            model = CLIPModel(config)
        else:
            model = CLIPVisionModel(vision_config)
    model.save_pretrained(folder)
    CLIPImageProcessorPil(**_processor_sizes(vision_config.image_size)).save_pretrained(folder)


def save_videomae(folder: Path, config: dict = TINY_VIDEOMAE) -> None:
    """A random `VideoMAEModel` with `VideoMAEImageProcessorPil`."""
    videomae_config = VideoMAEConfig(**config)
    with torch.random.fork_rng():
        torch.manual_seed(SEED)
        model = VideoMAEModel(videomae_config)
    model.save_pretrained(folder)
    VideoMAEImageProcessorPil(**_processor_sizes(videomae_config.image_size)).save_pretrained(folder)


# The encoders the command saves, each tiny.
SAVERS = {
    "clip": save_clip,
    "clip_dual": lambda folder: save_clip(folder, with_text=True),
    "videomae": save_videomae,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m fiberbench.testing.tiny_encoders",
        description="Save a tiny random encoder for extract-features, offline, in seconds.",
    )
    parser.add_argument(
        "encoder",
        choices=list(SAVERS),
        help="clip: a CLIP vision tower (D 48); clip_dual: a whole CLIP model (D 24); videomae: VideoMAE (D 40).",
    )
    parser.add_argument("output_dir", type=Path)
    args = parser.parse_args(argv)
    SAVERS[args.encoder](args.output_dir)
    print(f"Saved a tiny random {args.encoder} encoder in {args.output_dir}")


if __name__ == "__main__":
    main()
