"""The model a run trains or evaluates: a tiny one built from the shipped tokenizer, or a T5 / FIBER checkpoint."""

import argparse

from transformers import AutoConfig, AutoTokenizer

from fiberbench.modeling import (
    SAMPLE_TOKENIZER_PATH,
    FiberProcessor,
    FiberT5Config,
    FiberT5ForConditionalGeneration,
    build_tiny_config,
)

# The paper's main model (Table 3, "T5 + I3D") when neither --fusion nor a FIBER checkpoint says otherwise.
DEFAULT_FUSION = "early"


def resolve_fusion(args: argparse.Namespace) -> str:
    """--fusion, else a FIBER checkpoint's own fusion, else early fusion; "none" for a baseline.

    Raises a ValueError for --single_feature with a text-only model, before anything is loaded.
    """
    if args.baseline is not None:
        return "none"
    fusion = args.fusion
    if fusion is None and args.model_name_or_path is not None:
        config = AutoConfig.from_pretrained(args.model_name_or_path)
        fusion = config.fusion if isinstance(config, FiberT5Config) else None
    fusion = fusion or DEFAULT_FUSION
    if args.single_feature and fusion == "none":
        raise ValueError("--single_feature picks one video feature per clip; it needs --fusion early or late.")
    return fusion


def build_model(args: argparse.Namespace, fusion: str) -> tuple[FiberT5ForConditionalGeneration, FiberProcessor]:
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
            config.update_from_string(args.config_overrides)
        model = FiberT5ForConditionalGeneration(config)
    else:
        tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path)
        model = FiberT5ForConditionalGeneration.from_pretrained(args.model_name_or_path, fusion=fusion)
    if args.num_beams is not None:
        model.generation_config.num_beams = args.num_beams
    return model, FiberProcessor(tokenizer, single_feature=args.single_feature)
