"""FiberT5Config: a T5 configuration plus the video input and the way it is fused with the caption."""

from huggingface_hub.dataclasses import strict
from transformers import T5Config

FUSIONS = ("none", "early", "late")


@strict
class FiberT5Config(T5Config):
    r"""
    Configuration of a [`FiberT5ForConditionalGeneration`]: every [`T5Config`] argument, plus the
    ones below. Any T5 checkpoint's config is a valid starting point (`fusion` etc. keep their
    defaults unless given).

    Args:
        video_feature_size (`int`, *optional*, defaults to 1024):
            Size of one video feature vector (I3D: 1024), projected linearly to `d_model`.
        video_features_name (`str`, *optional*, defaults to `"i3d"`):
            Which features the model reads: the name of the FIBER dataset config that holds them
            (`"i3d"`: VaTeX's I3D; otherwise the config `fiberbench extract-features` named after
            the encoder). Set by the training script from the data it trains on; `fiberbench
            predict` reads this config.
        fusion (`str`, *optional*, defaults to `"none"`):
            How the video joins the caption (FIBER paper, §4.2). `"none"`: text only, exactly T5.
            `"early"`: the projected features follow the token embeddings through the T5 encoder.
            `"late"`: a video transformer over the projected features and the T5 encoder over the
            text, then a fusion transformer over both outputs.
        num_video_layers (`int`, *optional*, defaults to 1):
            Layers of the video transformer (late fusion only).
        num_fusion_layers (`int`, *optional*, defaults to 1):
            Layers of the fusion transformer (late fusion only).
        decoder_start_token_id (`int`, *optional*, defaults to 0):
            First decoder input; T5 starts decoding from its pad token.

    Invalid values raise a `ValueError` when the config is built.
    """

    model_type = "fiber_t5"

    video_feature_size: int = 1024
    video_features_name: str = "i3d"
    fusion: str = "none"
    num_video_layers: int = 1
    num_fusion_layers: int = 1
    decoder_start_token_id: int | None = 0

    def __post_init__(self, **kwargs):
        # Called directly (not only through `@strict`'s wrapper) so that a bad value is a plain
        # ValueError at construction.
        self.validate_fusion()
        super().__post_init__(**kwargs)

    @classmethod
    def get_config_dict(cls, pretrained_model_name_or_path, **kwargs):
        """Read a saved config; a T5 checkpoint's config reads as a FIBER one with the FIBER defaults.

        Every T5 field is a FiberT5Config field, so `from_pretrained("t5-base", fusion="early")`
        starts a FIBER model from T5 (no "model of type t5" warning). Any other architecture's
        config is a ValueError.
        """
        config_dict, kwargs = super().get_config_dict(pretrained_model_name_or_path, **kwargs)
        model_type = config_dict.get("model_type")
        if model_type not in (cls.model_type, "t5"):
            # Another architecture's fields would be read as T5's: a model that loads none of its weights.
            raise ValueError(
                f"{pretrained_model_name_or_path} holds a {model_type!r} model: a FIBER model starts from a FIBER "
                "or T5 checkpoint."
            )
        config_dict["model_type"] = cls.model_type
        return config_dict, kwargs

    def validate_fusion(self):
        """Check the FIBER fields; `@strict` runs this again before `save_pretrained` writes the config."""
        if self.fusion not in FUSIONS:
            raise ValueError(f"`fusion` must be one of {FUSIONS}, got {self.fusion!r}.")
        for name in ("video_feature_size", "num_video_layers", "num_fusion_layers"):
            if getattr(self, name) < 1:
                raise ValueError(f"`{name}` must be a positive integer, got {getattr(self, name)!r}.")
        if not self.video_features_name:
            raise ValueError("`video_features_name` must name the dataset config of the features, got an empty string.")


__all__ = ["FUSIONS", "FiberT5Config"]
