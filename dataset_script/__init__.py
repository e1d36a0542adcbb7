"""FIBER data: the dataset builder, the bundled synthetic sample, and tools to make new fill-in-the-blanks data."""

from .loading import load_fiber
from .sample import SAMPLE_DIR, load_sample

__all__ = ["SAMPLE_DIR", "load_fiber", "load_sample"]
