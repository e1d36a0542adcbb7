"""What a folder of video features holds: VaTeX's I3D (the `i3d` config), or an encoder's features in that layout with
a `features.json` (written by `fiberbench extract-features`) that `build-dataset` makes their config from.
"""

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from fiberbench.errors import DataError
from fiberbench.json_records import read_json_records
from fiberbench.records import VIDEO_FEATURE_SIZE

FEATURES_INFO_FILE = "features.json"
I3D_CONFIG = "i3d"
# A config's Parquet folder is named after it: a plain folder name, and not a config that means something else.
CONFIG_NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]*")
RESERVED_CONFIG_NAMES = ("text", I3D_CONFIG, "default")
LAYOUT = "{video_id}_{start:06d}_{end:06d}.npy per clip, float32 of shape (1, T, feature_size), as VaTeX's I3D"


def check_config_name(name: str) -> str | None:
    """Why `name` cannot name a features config (None when it can)."""
    if not CONFIG_NAME_PATTERN.fullmatch(name):
        rule = "lower-case letters, digits, '_' and '-', starting with a letter or digit"
        return f"{name!r} is not a config name ({rule})"
    if name in RESERVED_CONFIG_NAMES:
        return f"{name!r} is the name of another config ({', '.join(RESERVED_CONFIG_NAMES)} are taken)"
    return None


@dataclass(frozen=True)
class FeaturesInfo:
    """The features of one folder, as `features.json` records them (VaTeX's I3D: `FeaturesInfo()`)."""

    name: str = I3D_CONFIG  # the dataset config they become
    feature_size: int = VIDEO_FEATURE_SIZE  # D
    # The model that made them: `name_or_path`, `revision`, `commit` (a Hub model's) or `files` (a local folder's,
    # with their hashes), `model_type`, `kind` ("image": applied per frame; "video": per window of frames), `dtype`.
    encoder: dict | None = None
    output: dict | None = None  # which of its outputs one feature is: `pooling` and its `description`
    sampling: dict | None = None  # which frames of each clip were encoded: `FrameSampling`'s fields and `rule`
    fiberbench_version: str | None = None
    layout: str = LAYOUT

    @property
    def is_i3d(self) -> bool:
        return self.encoder is None

    def describe(self) -> str:
        """The features in words, for logs and the dataset card."""
        if self.is_i3d:
            return "VaTeX's I3D features (one 1024-d vector per 16-frame window)"
        origin = ", ".join(f"{key} {self.encoder[key]}" for key in ("revision", "commit") if self.encoder.get(key))
        return (f"`{self.encoder['name_or_path']}`{f' ({origin})' if origin else ''} features: "
                f"{self.output['description']}; frames: {self.sampling['rule']}")

    def to_json(self) -> dict:
        """`features.json`'s content (VaTeX's I3D: its name, D and layout only)."""
        return {key: value for key, value in asdict(self).items() if value is not None}

    def settings(self) -> dict:
        """What the features depend on (all but D): a folder is resumed only when these are the same."""
        return {key: value for key, value in self.to_json().items() if key != "feature_size"}

    @classmethod
    def read(cls, folder: str | Path) -> "FeaturesInfo":
        """The features of `folder`: its `features.json`, checked field by field (a `DataError` naming the file and
        the field); VaTeX's I3D when it has none."""
        path = Path(folder) / FEATURES_INFO_FILE
        if not path.exists():
            return cls()
        values = list(read_json_records(path))  # a file that is not JSON objects is a DataError naming it
        if len(values) != 1:
            raise DataError(f"{path}: expected one JSON object, got {len(values)}")
        content = values[0]
        name, size = content.get("name"), content.get("feature_size")
        problem = check_config_name(name) if isinstance(name, str) else "missing or not a string"
        if problem:
            raise DataError(f"{path}: field 'name': {problem}")
        if type(size) is not int or size < 1:
            raise DataError(f"{path}: field 'feature_size' must be a positive integer, got {json.dumps(size)[:40]}")
        sections = {}
        for section, required in (("encoder", "name_or_path"), ("output", "description"), ("sampling", "rule")):
            value = content.get(section)
            if not isinstance(value, dict) or not isinstance(value.get(required), str):
                raise DataError(f"{path}: field '{section}' must be an object with a string '{required}'")
            sections[section] = value
        version = content.get("fiberbench_version")
        return cls(name, size, fiberbench_version=version if isinstance(version, str) else None, **sections)
