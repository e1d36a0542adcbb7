"""What answers the blanks: a FIBER model (tiny, or a T5 or FIBER checkpoint) or the most-frequent-answer baseline."""

import argparse
from pathlib import Path

from transformers import AutoConfig, AutoTokenizer

from fiberbench.errors import DataError, UsageError
from fiberbench.hub import model_loading_options
from fiberbench.modeling import (
    SAMPLE_TOKENIZER_PATH,
    FiberProcessor,
    FiberT5Config,
    FiberT5ForConditionalGeneration,
    build_tiny_config,
)

# The paper's main model (Table 3, "T5 + I3D") when neither --fusion nor a FIBER checkpoint says otherwise.
DEFAULT_FUSION = "early"
SAFETENSORS_FILES = ("model.safetensors", "model.safetensors.index.json")


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


def resolve_fusion(args: argparse.Namespace, options: dict) -> str:
    """--fusion, else a FIBER checkpoint's own fusion, else early fusion; "none" for a baseline.

    Raises a `UsageError` for --single_feature with a text-only model, before anything is trained.
    """
    if args.baseline is not None:
        return "none"
    fusion = args.fusion
    if fusion is None and args.model_name_or_path is not None:
        config = AutoConfig.from_pretrained(args.model_name_or_path, **without_weights_options(options))
        fusion = config.fusion if isinstance(config, FiberT5Config) else None
    fusion = fusion or DEFAULT_FUSION
    if args.single_feature and fusion == "none":
        raise UsageError("--single_feature picks one video feature per clip; it needs --fusion early or late.")
    return fusion


def without_weights_options(options: dict) -> dict:
    """The loading options that apply to configs and tokenizers (which have no weights)."""
    return {key: value for key, value in options.items() if key != "use_safetensors"}


def build_model(
    args: argparse.Namespace, fusion: str, options: dict
) -> tuple[FiberT5ForConditionalGeneration, FiberProcessor]:
    """The model and its processor.

    With no --model_name_or_path: a tiny model (see `build_tiny_config`, plus --config_overrides)
    over the tokenizer shipped with the package, so the main job needs no download. Otherwise
    the checkpoint, a T5 one getting fresh video weights (`FiberT5ForConditionalGeneration.from_pretrained`).
    --num_beams, when given, becomes the model's generation setting, so the saved model decodes
    as it was evaluated.
    """
    if args.model_name_or_path is None:
        tokenizer = AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH)
        config = build_tiny_config(tokenizer, fusion)
        if args.config_overrides:
            try:
                config.update_from_string(args.config_overrides)
            except ValueError as error:
                raise UsageError(f"--config_overrides {args.config_overrides}: {error}") from error
        model = FiberT5ForConditionalGeneration(config)
    else:
        tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path, **without_weights_options(options))
        model = FiberT5ForConditionalGeneration.from_pretrained(args.model_name_or_path, fusion=fusion, **options)
    if args.num_beams is not None:
        model.generation_config.num_beams = args.num_beams
    return model, FiberProcessor(tokenizer, single_feature=args.single_feature)

