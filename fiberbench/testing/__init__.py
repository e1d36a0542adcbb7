"""Tiny random models, encoders and videos built offline in seconds, where real checkpoints cannot be downloaded: for
the tests, the benchmarks and the docs' offline examples (`python -m fiberbench.testing`).

- `tiny_models`: a tiny model of each kind `fiberbench predict` runs; `video_families`: nine video-LLM families;
- `tiny_encoders`: encoders for `fiberbench extract-features`; `tiny_videos`: synthetic videos of clips.
"""
