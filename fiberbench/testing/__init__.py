"""Tiny random models, encoders and videos, built offline in seconds: what the tests, the benchmarks and the docs'
offline examples run on where the real checkpoints (t5-base, Qwen2-VL, CLIP...) cannot be downloaded.

- `python -m fiberbench.testing.tiny_models`: tiny video-LLMs of every family and synthetic videos of the clips.
- `python -m fiberbench.testing.tiny_encoders`: a tiny random encoder for `fiberbench extract-features`.
"""
