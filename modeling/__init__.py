"""The FIBER model: T5 with early or late fusion of I3D video features, its processor and decoding.

Importing this package registers the model with the Auto classes (`AutoConfig`, `AutoModel`,
`AutoModelForSeq2SeqLM`, `AutoProcessor`) and marks the classes for `register_for_auto_class`, so
`save_pretrained` writes `auto_map` and the code files: a saved folder then loads with
`trust_remote_code=True` where this package is not installed.
"""

from pathlib import Path

from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM, AutoProcessor

from .configuration_fiber_t5 import FUSIONS, FiberT5Config, build_tiny_config
from .modeling_fiber_t5 import FiberT5ForConditionalGeneration
from .processing_fiber import FiberProcessor

# A T5-style tokenizer trained on the bundled sample's captions (made by make_sample_tokenizer.py).
SAMPLE_TOKENIZER_PATH = Path(__file__).parent / "tokenizer"

AutoConfig.register(FiberT5Config.model_type, FiberT5Config, exist_ok=True)
AutoModel.register(FiberT5Config, FiberT5ForConditionalGeneration, exist_ok=True)
AutoModelForSeq2SeqLM.register(FiberT5Config, FiberT5ForConditionalGeneration, exist_ok=True)
AutoProcessor.register(FiberT5Config, FiberProcessor, exist_ok=True)
FiberT5Config.register_for_auto_class()
FiberT5ForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")
FiberProcessor.register_for_auto_class("AutoProcessor")

__all__ = [
    "FUSIONS",
    "SAMPLE_TOKENIZER_PATH",
    "FiberProcessor",
    "FiberT5Config",
    "FiberT5ForConditionalGeneration",
    "build_tiny_config",
]
