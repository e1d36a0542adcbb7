"""Fixtures for the model tests: the shipped tokenizer, tiny models, sample clips, a counting spaCy pipeline."""

import json

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from fiberbench.data import SAMPLE_DIR
from fiberbench.records import feature_file_name
from fiberbench.modeling import (
    SAMPLE_TOKENIZER_PATH,
    FiberProcessor,
    FiberT5ForConditionalGeneration,
    build_tiny_config,
)


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
    """Three validation clips of the bundled sample with different caption and video lengths."""
    records = json.loads((SAMPLE_DIR / "val.json").read_text(encoding="utf-8"))
    chosen, caption_lengths, video_lengths = [], set(), set()
    for record in records:
        clip_name = feature_file_name(record["video_id"], record["video_start_time"], record["video_end_time"])
        features = np.load(SAMPLE_DIR / "i3d" / clip_name)[0]
        if len(record["masked_caption"].split()) in caption_lengths or len(features) in video_lengths:
            continue
        caption_lengths.add(len(record["masked_caption"].split()))
        video_lengths.add(len(features))
        chosen.append({"masked_caption": record["masked_caption"], "label": record["label"], "video": features})
        if len(chosen) == 3:
            return chosen
    raise AssertionError("The sample has no three clips with different caption and video lengths.")


class CountingPipeline:
    """A spaCy pipeline that counts the `pipe` calls and the texts they parse."""

    def __init__(self, nlp):
        self.nlp = nlp
        self.calls = 0
        self.parsed = 0

    @property
    def pipe_names(self):
        return self.nlp.pipe_names

    def pipe(self, texts, **kwargs):
        self.calls += 1
        return self.nlp.pipe(self._count(texts), **kwargs)

    def _count(self, texts):
        for text in texts:
            self.parsed += 1
            yield text


@pytest.fixture
def counting_nlp(nlp):
    return CountingPipeline(nlp)
