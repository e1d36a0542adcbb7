"""The output folder of `fiberbench extract-features`: one `{clip}.npy` per clip, `features.json`, and its record.

The folder has the release's layout (`fiberbench.data.fiber.features_info`), so `build-dataset
--features_dir` reads it as it reads VaTeX's I3D. It is an output of `fiberbench.ownership`:
- Its record, `fiberbench_output.json`, lists every file the run will write (the clips' `.npy`
  before they are encoded, and `features.json`), says `running` until the run ends, and keeps the
  run's arguments and, at the end, what it wrote (`output`).
- A rerun resumes it: a clip whose `.npy` is there (shape (1, T, D), float32, D that of
  `features.json`) is skipped, when `features.json` describes the same features (encoder, output,
  sampling, package version); features of other settings are refused, or with
  --overwrite_output_dir removed first. A file it did not write (a name it lists) is never replaced.
- Each file is written atomically (`fiberbench.files`): a killed run leaves whole files only, and
  the next run removes its temporary files in one sweep of the folder.
- Only the main process writes the record and `features.json`; each clip's file is written by the
  one process that encodes it.
"""

import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from fiberbench.data.fiber.features_info import FEATURES_INFO_FILE, FeaturesInfo
from fiberbench.errors import DataError, UsageError
from fiberbench.files import atomic_path, remove_stale_temporaries, write_json
from fiberbench.ownership import COMPLETE, RUNNING, Output, OutputRecord, differences, names_pattern, remove_entries

COMMAND = "fiberbench extract-features"
# Differences in these settings are named first when a rerun is refused: they change the features most.
SETTINGS_ORDER = ("encoder", "output", "sampling")
# What a run writes in its folder: a user's file of another name is never touched.
ENTRY_NAMES = names_pattern(FEATURES_INFO_FILE, re.compile(r"[A-Za-z0-9_-]+\.npy"))


def file_name(name: str) -> str:
    """The features file of clip `name` (its clip id, or a video's file name without extension)."""
    return f"{name}.npy"


class FeaturesFolder:
    """--output_dir of one run: checked before any work, then claimed, filled clip by clip, and finished."""

    def __init__(self, path: Path, overwrite: bool):
        self.output = Output.output_dir(
            path,
            overwrite=overwrite,
            command=COMMAND,
            entry_names=ENTRY_NAMES,
            leaves_others=True,
        )
        self.path = self.output.path
        self.overwrite = overwrite
        self.previous_entries: list[str] = []  # an earlier run's, kept (resumed) or removed (overwritten) by `claim`
        self.previous: FeaturesInfo | None = None  # the features of an earlier run of the same settings

    def check(self, inputs: Iterable, settings: dict) -> None:
        """Refuse, before any work, a folder this run may not write (`Output.check`), or one holding features of
        other `settings` (`FeaturesInfo.settings`) unless overwriting; else note what an earlier run left."""
        self.check_record(self.output.check(inputs, resume=True), settings)

    def check_record(self, record: OutputRecord | None, settings: dict) -> None:
        """What `check` refuses in an earlier run's output (its `record`); again by `Output.open`, under the lock."""
        if record is None:
            return
        self.previous_entries = sorted(record.entries)
        if self.overwrite:
            return
        info_path = self.path / FEATURES_INFO_FILE
        if not info_path.exists():  # a run killed before it encoded anything
            return
        previous = FeaturesInfo.read(self.path)
        if previous.settings() != settings:
            found = differences(settings, previous.settings(), SETTINGS_ORDER)
            more = f", and {len(found) - 3} more" if len(found) > 3 else ""
            raise UsageError(
                f"--output_dir {self.path} holds features made with other settings ({'; '.join(found[:3])}{more}); "
                "pass --overwrite_output_dir to replace them, or choose another folder"
            )
        self.previous = previous

    def done(self, names: list[str]) -> set[str]:
        """The clips of `names` whose features are already there (none when overwriting), each file checked.

        Raises:
            DataError: a file of these features that is not (1, T, D) float32.
        """
        if self.overwrite or self.previous is None:
            return set()
        found = set()
        for name in names:
            path = self.path / file_name(name)
            if path.is_file():
                self._check_file(path, self.previous.feature_size)
                found.add(name)
        return found

    @staticmethod
    def _check_file(path: Path, feature_size: int) -> None:
        try:
            with open(path, "rb") as file:
                version = np.lib.format.read_magic(file)
                read_header = (
                    np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                )
                shape, _, dtype = read_header(file)
        except (OSError, ValueError) as error:
            raise DataError(f"{path}: not a readable .npy file ({error}); remove it and run again") from error
        if len(shape) != 3 or shape[0] != 1 or shape[1] < 1 or shape[2] != feature_size or dtype != np.float32:
            raise DataError(
                f"{path}: holds {dtype} of shape {shape}, not the float32 (1, T, {feature_size}) of this folder's "
                "features; remove it and run again"
            )

    def claim(self, previous: OutputRecord | None, names: list[str], arguments: dict) -> None:
        """Start writing (main process, holding the lock): an overwritten run's files go; this run's are listed."""
        self.path.mkdir(parents=True, exist_ok=True)
        if self.overwrite and previous is not None:
            self.output.notice_kept(remove_entries(self.path, previous.entries))
            self.previous_entries = []
        remove_stale_temporaries(self.path)
        entries = {name: None for name in [*self.previous_entries, FEATURES_INFO_FILE, *map(file_name, names)]}
        self.output.write_record(RUNNING, entries=entries, **arguments)

    def write_info(self, info: FeaturesInfo) -> None:
        """`features.json` (main process, before any clip is written)."""
        write_json(self.path / FEATURES_INFO_FILE, info.to_json())

    def write(self, name: str, features: np.ndarray) -> None:
        """Clip `name`'s features (T, D), as float32 (1, T, D) like VaTeX's I3D files, atomically."""
        with atomic_path(self.path / file_name(name), remove_stale=False) as temporary, open(temporary, "wb") as file:
            np.save(file, features[None].astype(np.float32, copy=False), allow_pickle=False)

    def finish(self, output: dict) -> None:
        """The run is over (main process): the record says `complete`, with what was written (`output`)."""
        self.output.write_record(COMPLETE, output=output)
