"""Fixtures for the model tests: the shipped tokenizer, tiny models, sample clips, a counting spaCy pipeline."""

import json

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from fiberbench.data import SAMPLE_DIR
from fiberbench.modeling import SAMPLE_TOKENIZER_PATH, FiberProcessor, FiberT5ForConditionalGeneration
from fiberbench.modeling import build_tiny_config
from fiberbench.records import feature_file_name


@pytest.fixture(scope="session")
def tokenizer():
    return AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH)


@pytest.fixture(scope="session")
def processor(tokenizer):
    return FiberProcessor(tokenizer)


@pytest.fixture(scope="session")
def make_model(tokenizer):
    """Build a tiny model with fixed random weights, in eval mode."""

    def make(fusion: str, **overrides) -> FiberT5ForConditionalGeneration:
        torch.manual_seed(0)
        return FiberT5ForConditionalGeneration(build_tiny_config(tokenizer, fusion, **overrides)).eval()

    return make


@pytest.fixture(scope="session")
def sample_clips():
    """Three validation clips of the bundled sample, each of its own caption and video length."""
    chosen, lengths = [], set()
    for record in json.loads((SAMPLE_DIR / "val.json").read_text(encoding="utf-8")):
        clip = feature_file_name(record["video_id"], record["video_start_time"], record["video_end_time"])
        features = np.load(SAMPLE_DIR / "i3d" / clip)[0]
        words = len(record["masked_caption"].split())
        if ("words", words) not in lengths and ("frames", len(features)) not in lengths:
            lengths |= {("words", words), ("frames", len(features))}
            chosen.append({"masked_caption": record["masked_caption"], "label": record["label"], "video": features})
    assert len(chosen) >= 3, "the sample has no three clips of different caption and video lengths"
    return chosen[:3]


class CountingPipeline:
    """A spaCy pipeline that counts its `pipe` calls and the texts they parse."""

    def __init__(self, nlp):
        self.nlp, self.calls, self.parsed, self.pipe_names = nlp, 0, 0, nlp.pipe_names

    def pipe(self, texts, **kwargs):
        texts = list(texts)
        self.calls, self.parsed = self.calls + 1, self.parsed + len(texts)
        return self.nlp.pipe(texts, **kwargs)


@pytest.fixture
def counting_nlp(nlp):
    return CountingPipeline(nlp)
