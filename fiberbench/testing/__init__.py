"""Tiny random models (`tiny_models`, `video_families`), encoders (`tiny_encoders`) and synthetic videos (`tiny_videos`)
built offline in seconds, where real checkpoints cannot be downloaded: for the tests, the benchmarks and the docs'
offline examples (`python -m fiberbench.testing`)."""
