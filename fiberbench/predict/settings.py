"""The settings of one `fiberbench predict` run: its flags, read once from the parsed command line, never changed.

Every part of a run (the checks, the predictors, `--reread`) reads a `PredictSettings`, not the
argparse namespace: its fields are the flags `arguments.add_arguments` defines, by their names, and
nothing else (`arguments.parse_settings` reads them from a list of flags). What a run decides from them (the default `--prompt` of a kind that reads one) is a
new object (`for_kind`), never a change to this one.
"""

import argparse
from dataclasses import dataclass, fields, replace
from pathlib import Path

from fiberbench.prompts import DEFAULT_PROMPT


@dataclass(frozen=True)
class PredictSettings:
    """`fiberbench predict`'s flags, by their names (see `fiberbench predict --help`)."""

    # model
    model_name_or_path: str | None
    revision: str | None
    model_type: str | None
    device_map: str | None
    trust_remote_code: bool
    # data
    dataset_name: str | None
    split: str
    max_predict_samples: int | None
    video_dir: Path | None
    video_input: str | None
    num_frames: int | None
    fps: float | None
    max_frames: int | None
    skip_missing_videos: bool
    # decoding
    prompt: str | None
    num_beams: int | None
    max_new_tokens: int
    only_noun_phrases: bool
    read_noun_phrases: bool | None
    spacy_model: str | None
    per_device_eval_batch_size: int
    dataloader_num_workers: int | None
    # output
    output_file: Path
    overwrite_output_file: bool
    reread: Path | None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "PredictSettings":
        """The settings of a parsed command line (other attributes of `args`, such as the subcommand's, are not
        settings)."""
        return cls(**{field.name: getattr(args, field.name) for field in fields(cls)})

    def for_kind(self, prompted: bool) -> "PredictSettings":
        """The settings a model of a kind runs with: a kind that reads a prompt gets the default one when --prompt is
        not given."""
        if prompted and self.prompt is None:
            return replace(self, prompt=DEFAULT_PROMPT)
        return self
