"""The FIBER model: T5 with early or late fusion of I3D video features, its processor and decoding.

Importing this package registers the model with the Auto classes (`AutoConfig`, `AutoModel`,
`AutoModelForSeq2SeqLM`, `AutoProcessor`) and marks the classes for `register_for_auto_class`, so
`save_pretrained` writes `auto_map` and the code files: a saved folder then loads with
`trust_remote_code=True` where this package is not installed.
"""

from pathlib import Path

from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM, AutoProcessor

from .configuration_fiber_t5 import FUSIONS, FiberT5Config
from .modeling_fiber_t5 import FiberT5ForConditionalGeneration
from .processing_fiber import FiberProcessor

# A T5-style tokenizer trained on the bundled sample's captions (made by
# dataset_script/fiber/make_sample_tokenizer.py): with `build_tiny_config`, the offline stand-in for t5-base.
SAMPLE_TOKENIZER_PATH = Path(__file__).parent / "tokenizer"

AutoConfig.register(FiberT5Config.model_type, FiberT5Config, exist_ok=True)
AutoModel.register(FiberT5Config, FiberT5ForConditionalGeneration, exist_ok=True)
AutoModelForSeq2SeqLM.register(FiberT5Config, FiberT5ForConditionalGeneration, exist_ok=True)
AutoProcessor.register(FiberT5Config, FiberProcessor, exist_ok=True)
FiberT5Config.register_for_auto_class()
FiberT5ForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")
FiberProcessor.register_for_auto_class("AutoProcessor")


def build_tiny_config(tokenizer, fusion: str = "none", **overrides) -> FiberT5Config:
    """A tiny FiberT5Config for `tokenizer` (d_model 32, one layer each side): the offline stand-in for t5-base.

    With the tokenizer at `SAMPLE_TOKENIZER_PATH` it builds and trains in seconds on a CPU, with no
    download (the main job, the tests and the benchmarks use it); `overrides` set any other field
    (`d_model=64`, ...). It lives here, not in the configuration file that ships with every model.
    """
    fields = {"vocab_size": len(tokenizer), "d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 1, "num_heads": 4,
              "num_decoder_layers": 1, "fusion": fusion, "pad_token_id": tokenizer.pad_token_id,
              "eos_token_id": tokenizer.eos_token_id, "decoder_start_token_id": tokenizer.pad_token_id}
    return FiberT5Config(**{**fields, **overrides})


__all__ = ["FUSIONS", "SAMPLE_TOKENIZER_PATH", "FiberProcessor", "FiberT5Config", "FiberT5ForConditionalGeneration",
           "build_tiny_config"]
