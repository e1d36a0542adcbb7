"""`fiberbench clips`: which clips of a split have a video in a folder, with the fingerprint of those present."""

import json

from fiberbench.cli import main
from fiberbench.records import clip_id, clips_fingerprint

from .conftest import KEYS, videos_but_one


def test_the_manifest_names_the_clips_present_and_missing(video_dir, tmp_path, cli_error):
    videos = videos_but_one(video_dir, tmp_path, index=1)  # a whole video gone
    (videos / f"{clip_id(*KEYS[2])}.mp4").unlink()  # and a clip's own file
    manifest_file = tmp_path / "clips.json"
    assert main(["clips", str(videos), "--output_file", str(manifest_file)]) == 0
    present = [clip_id(*key) for index, key in enumerate(KEYS) if index not in (1, 2)]
    assert json.loads(manifest_file.read_text()) == {
        "dataset": None, "split": "test", "clips": 60, "present": present,
        "missing": [clip_id(*KEYS[1]), clip_id(*KEYS[2])], "clips_fingerprint": clips_fingerprint(present)}
    status, line = cli_error("clips", videos, "--output_file", manifest_file)
    assert status == 2 and "pass --overwrite_output_file to replace it" in line, line
    status, line = cli_error("clips", tmp_path / "absent", "--output_file", tmp_path / "other.json")
    assert status == 1 and line.endswith("absent: no such folder (give the folder of the clips' videos)"), line
