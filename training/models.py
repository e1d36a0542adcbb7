"""What answers the blanks: a FIBER model (tiny, or a T5 or FIBER checkpoint) or the most-frequent-answer baseline."""

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path

from transformers import AutoConfig, AutoTokenizer

from fiberbench.errors import DataError, UsageError
from fiberbench.models import model_loading_options
from fiberbench.modeling import (
    SAMPLE_TOKENIZER_PATH,
    FiberProcessor,
    FiberT5Config,
    FiberT5ForConditionalGeneration,
    build_tiny_config,
)

logger = logging.getLogger(__name__)

# The paper's main model (Table 3, "T5 + I3D") when neither --fusion nor a FIBER checkpoint says otherwise.
DEFAULT_FUSION = "early"
SAFETENSORS_FILES = ("model.safetensors", "model.safetensors.index.json")


@dataclass(frozen=True)
class VideoFeatures:
    """The video features a run reads: the dataset config that holds them (`i3d`, or an encoder's) and their size D."""

    name: str
    size: int


def loading_options(name: str) -> dict:
    """`from_pretrained` options for `name` (a folder or Hub id), after checking, in seconds, that it can load.

    A local folder must hold safetensors weights: a folder with only pickled weights
    (`pytorch_model.bin`) is refused rather than unpickled. A Hub id must be in the local cache
    or the Hub must answer; offline (`HF_HUB_OFFLINE=1`) or unreachable, a cached model loads
    from the cache alone, and anything else is one `UsageError` naming the ways out.
    """
    folder = Path(name).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise DataError(f"--model_name_or_path {name}: the folder has no config.json (not a saved model).")
        if not any((folder / file).is_file() for file in SAFETENSORS_FILES):
            pickles = sorted(path.name for path in folder.glob("*.bin")) or ["no weights file"]
            raise DataError(
                f"--model_name_or_path {name}: no model.safetensors in the folder (found: {', '.join(pickles)}); "
                "pickled weights are not loaded, as loading a pickle can run code. Convert the model to "
                "safetensors where you trust it (from_pretrained, then save_pretrained)."
            )
        return {"use_safetensors": True}
    return model_loading_options(name, flag="--model_name_or_path")


def checkpoint_config(args: argparse.Namespace, options: dict) -> FiberT5Config | None:
    """The config of the FIBER checkpoint --model_name_or_path; None without one, or for a T5 checkpoint."""
    if args.model_name_or_path is None:
        return None
    config = AutoConfig.from_pretrained(args.model_name_or_path, **without_weights_options(options))
    return config if isinstance(config, FiberT5Config) else None


def resolve_fusion(args: argparse.Namespace, options: dict) -> str:
    """--fusion, else a FIBER checkpoint's own fusion, else early fusion; "none" for a baseline.

    Raises a `UsageError` for --single_feature with a text-only model, before anything is trained.
    """
    if args.baseline is not None:
        return "none"
    fusion = args.fusion
    if fusion is None:
        config = checkpoint_config(args, options)
        fusion = config.fusion if config is not None else None
    fusion = fusion or DEFAULT_FUSION
    if args.single_feature and fusion == "none":
        raise UsageError("--single_feature picks one video feature per clip; it needs --fusion early or late.")
    return fusion


def without_weights_options(options: dict) -> dict:
    """The loading options that apply to configs and tokenizers (which have no weights)."""
    return {key: value for key, value in options.items() if key != "use_safetensors"}


def check_video_features(args: argparse.Namespace, options: dict, video: VideoFeatures) -> None:
    """Refuse, in one line and before any weights are read, a FIBER checkpoint whose video weights read features of
    another size than the data's; a checkpoint trained on other features of the same size is warned about."""
    config = checkpoint_config(args, options)
    if config is None or config.fusion == "none":  # no video weights yet: they are made for the data
        return
    if config.video_feature_size != video.size:
        raise DataError(
            f"--model_name_or_path {args.model_name_or_path} reads video features of size {config.video_feature_size} "
            f"(its {config.video_features_name!r} features), but the dataset's {video.name!r} config has features of "
            f"size {video.size}: give the config of the features it was trained on, or start from a T5 or text-only "
            "checkpoint"
        )
    if config.video_features_name != video.name:
        logger.warning(
            "%s was trained on the %r features and now reads the %r ones (of the same size)",
            args.model_name_or_path,
            config.video_features_name,
            video.name,
        )


def build_model(
    args: argparse.Namespace, fusion: str, options: dict, video: VideoFeatures | None = None
) -> tuple[FiberT5ForConditionalGeneration, FiberProcessor]:
    """The model and its processor.

    With no --model_name_or_path: a tiny model (see `build_tiny_config`, plus --config_overrides)
    over the tokenizer shipped with the package, so the main job needs no download. Otherwise
    the checkpoint, a T5 one getting fresh video weights (`FiberT5ForConditionalGeneration.from_pretrained`).
    A fusion model reads `video`: its `video_feature_size` is their size (checked against a FIBER
    checkpoint's by `check_video_features`) and its `video_features_name` their config.
    --num_beams, when given, becomes the model's generation setting, so the saved model decodes
    as it was evaluated.
    """
    features = {} if video is None else {"video_feature_size": video.size, "video_features_name": video.name}
    if args.model_name_or_path is None:
        tokenizer = AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH)
        config = build_tiny_config(tokenizer, fusion)
        config.update(features)
        if args.config_overrides:
            try:
                config.update_from_string(args.config_overrides)
            except ValueError as error:
                raise UsageError(f"--config_overrides {args.config_overrides}: {error}") from error
        model = FiberT5ForConditionalGeneration(config)
    else:
        if video is not None:
            check_video_features(args, options, video)
        tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path, **without_weights_options(options))
        model = FiberT5ForConditionalGeneration.from_pretrained(
            args.model_name_or_path, fusion=fusion, **features, **options
        )
    if args.num_beams is not None:
        model.generation_config.num_beams = args.num_beams
    return model, FiberProcessor(tokenizer, single_feature=args.single_feature)

