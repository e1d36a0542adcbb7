"""FIBER data: the dataset builder, the bundled synthetic sample, and tools to make new fill-in-the-blanks data."""

from .fiber.release import SAMPLE_DIR, SPLIT_FILES
from .loading import load_fiber, load_sample
from .provenance import is_synthetic

__all__ = ["SAMPLE_DIR", "SPLIT_FILES", "is_synthetic", "load_fiber", "load_sample"]
