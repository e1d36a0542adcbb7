"""Tiny random models, encoders and videos, built offline in seconds: what the tests, the benchmarks and the docs'
offline examples run on where the real checkpoints (t5-base, Qwen2-VL, CLIP...) cannot be downloaded.

- `tiny_models`: a tiny model of every kind `fiberbench predict` runs (`SAVERS`).
- `video_families`: tiny video-LLMs of nine families (`VIDEO_FAMILIES`).
- `tiny_videos`: synthetic videos of the bundled sample's clips.
- `tiny_encoders`: tiny random encoders for `fiberbench extract-features`.

From the command line: `python -m fiberbench.testing model FAMILY DIR` (a tiny video-LLM),
`python -m fiberbench.testing videos DIR` (the clips' videos), and
`python -m fiberbench.testing.tiny_encoders` (a tiny encoder).
"""
