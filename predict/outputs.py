"""The predictions file of `fiberbench predict`: written as it goes, resumable, merged in dataset order.

- `OUTPUT_FILE` (JSON Lines, what `fiberbench evaluate` reads): one row per clip of the split, in
  dataset order: `video_id`, `video_start_time`, `video_end_time`, `prediction`, with several
  beams `candidates` (the ranked, distinct beam answers) and, for models that reply in words,
  `raw` (the replies as generated, one per beam: `fiberbench predict --reread` reads them again;
  `fiberbench evaluate` ignores it).
- `OUTPUT_FILE` with the suffix `.metadata.json` beside it: the output's record
  (`fiberbench.ownership`: the command, its state `running` or `complete`, host, PID, times) with
  `settings` (model id, revision and commit, kind, the exact prompt, decoding, the answer reader,
  dataset and split, package version: what the predictions depend on) and, once the output holds
  rows of those settings, `output` (rows, clips skipped for a missing video).
- While a run goes on, it holds the output's lock, and its rows go to a hidden folder beside the
  output (`.NAME.parts/`): `settings.json`, then one JSON Lines file per batch and process
  (`rank-R-NNNNNN.jsonl`), each written atomically through `fiberbench.files`, so a killed run
  leaves whole batches only. A rerun with the same settings reads them and the finished output,
  and predicts only the clips not done yet; a clip skipped for a missing video is tried again. At
  the end the rows are merged in dataset order into the output (atomically) and the folder removed.
- Rows made with other settings are never mixed in: an output or unfinished run of other settings
  is refused, or with `overwrite` (--overwrite_output_file) ignored, the output being replaced
  only when the new one is complete. An output this command did not write is never replaced.
- A file of an earlier run that is not in this shape (edited or damaged) is a `DataError` naming
  the file, the line and the field.
"""

import json
import logging
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

from fiberbench.records import ClipKey, clip_key
from fiberbench.errors import DataError, UsageError
from fiberbench.files import write_json, write_jsonl
from fiberbench.ownership import COMPLETE, RUNNING, Output, OutputRecord, differences, record_path, working_folder

logger = logging.getLogger(__name__)

# The fields of every row and their JSON types (bool is not an int here: `type` is compared, not isinstance).
ROW_FIELDS = {"video_id": str, "video_start_time": int, "video_end_time": int, "prediction": str}
SKIPPED = "skipped"  # field of a part-file row whose clip had no video; the output row has an empty prediction
# Differences in these settings are named first when a rerun is refused: they change the answers most (the video
# input before the prompt, whose example follows from it).
SETTINGS_ORDER = ("model", "video", "prompt", "decoding", "dataset")


def metadata_path(output_file: Path) -> Path:
    """`predictions.jsonl` -> `predictions.metadata.json`, beside it: the output's record."""
    return record_path(Path(output_file), folder=False)


def _same_shape(settings, shape: dict) -> dict:
    """The values of `settings` at the keys of `shape` (nested alike); a key `settings` lacks is None."""
    settings = settings if isinstance(settings, dict) else {}
    return {
        key: _same_shape(settings.get(key), value) if isinstance(value, dict) else settings.get(key)
        for key, value in shape.items()
    }


def check_row(row, where: str) -> dict:
    """`row` if it is a row of a predictions or part file: the fields of `ROW_FIELDS`, `candidates` and `raw` lists of
    strings."""
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    for field, kind in ROW_FIELDS.items():
        if field not in row:
            raise DataError(f"{where}: field '{field}' is missing")
        if type(row[field]) is not kind:
            expected = "a string" if kind is str else "an integer"
            raise DataError(f"{where}: field '{field}' must be {expected}, got {json.dumps(row[field])[:60]}")
    for field in ("candidates", "raw"):
        values = row.get(field, [])
        if not (isinstance(values, list) and all(type(value) is str for value in values)):
            raise DataError(f"{where}: field '{field}' must be a list of strings, got {json.dumps(values)[:60]}")
    return row


def check_settings_fields(settings: dict, fields: dict, path: Path) -> None:
    """A `DataError` naming the first of `fields` ((section, field) -> the JSON types it may have) that `settings`
    (the settings recorded in `path`) lacks or holds as another type: metadata edited or damaged since predict wrote
    it, checked before a reader of the file relies on those fields."""
    for (section, field), kinds in fields.items():
        values = settings.get(section)
        if not isinstance(values, dict):
            problem = "is missing" if values is None else f"must be an object, got {type(values).__name__}"
            raise DataError(f"{path}: field 'settings.{section}' {problem}")
        if field not in values:
            raise DataError(f"{path}: field 'settings.{section}.{field}' is missing")
        if type(values[field]) not in kinds:
            expected = " or ".join("null" if kind is type(None) else kind.__name__ for kind in kinds)
            got = type(values[field]).__name__
            raise DataError(f"{path}: field 'settings.{section}.{field}' must be {expected}, got {got}")


class PredictionsFile:
    """The output file of one run's `settings`, its record (the metadata) and the part files of a run in progress."""

    def __init__(self, path: Path, settings: dict, overwrite: bool = False, request: dict | None = None):
        self.output = Output(path, command="fiberbench predict", flag="--output_file", overwrite=overwrite)
        self.request = request  # what the run asked for (`record.Request.asked`), recorded beside the settings
        self.path = self.output.path
        self.metadata_path = self.output.record_path
        self.parts = self.path.with_name(f".{self.path.name}.parts")
        self.settings_path = self.parts / "settings.json"
        self.settings = settings
        # With `overwrite`, the rows of an earlier output are neither resumed nor kept.
        self.overwrite = overwrite
        self._next_batch: dict[int, int] = {}  # rank -> the number of its next part file

    def with_settings(self, settings: dict) -> "PredictionsFile":
        """The same output, for a run of these `settings` (known in full only once the model and dataset are read)."""
        return PredictionsFile(self.output.given, settings, overwrite=self.overwrite, request=self.request)

    def part_paths(self) -> list[Path]:
        """The part files of every process, in the order they were written by each."""
        return sorted(self.parts.glob("rank-*.jsonl"))

    def open(self, inputs=(), accelerator=None, *, under_the_lock=None):
        """`Output.open` of the predictions: checked, locked, checked again (`check_content`, then `under_the_lock()`)
        and claimed (`prepare`); `complete` once `merge` has written the rows."""

        def recheck(previous: OutputRecord | None) -> None:
            self.check_content(previous)
            if under_the_lock is not None:
                under_the_lock()

        return self.output.open(inputs, resume=True, accelerator=accelerator, recheck=recheck, claim=self.prepare)

    def check_ours(self, inputs=()) -> None:
        """Before the dataset or the weights are read: refuse an output that is not this command's to write
        (`Output.check`); its settings are compared once they are known (`check_content`)."""
        self.output.check(inputs, resume=True)

    def check(self, inputs=()) -> None:
        """Refuse, before any work, an output that is not this command's to write (`Output.check`), or what
        `check_content` refuses."""
        self.check_content(self.output.check(inputs, resume=True))

    def check_content(self, previous: OutputRecord | None) -> None:
        """Refuse to mix these predictions with another run's (unless `overwrite`), to read damaged files, or a
        working folder that is not a folder of ours (`working_folder`).

        An earlier output of this command is resumed when it was written with the same settings and
        replaced with `overwrite`; the same for the part files of an unfinished run.
        """
        working_folder(self.parts, self.output.flag, self.output.given, create=False)
        if self.overwrite:
            return
        hint = "pass --overwrite_output_file to replace it, or another --output_file"
        if previous is not None:
            self._check_settings(self._read_metadata()["settings"], self.metadata_path, hint)
        if self.settings_path.exists():
            self._check_settings(self._read_parts_settings(), self.settings_path, hint)
        elif self.part_paths():
            raise DataError(f"{self.parts}: holds part files but no settings.json; remove the folder or {hint}")
        self._rows()  # every row is read once here, so that a damaged one is named before anything is written

    def answered_by_the_record(self, inputs) -> bool:
        """Before any model or pipeline is loaded: refuse (`UsageError`) an output whose recorded settings differ from
        `self.settings`, the part of them known from the arguments alone (`record.Request.known`); True when the
        output is complete and was asked for with this `request` (the same arguments, model files and dataset
        files): then a rerun has nothing left to do."""
        if self.overwrite or not (self.path.is_file() and self.metadata_path.is_file()):
            return False
        try:
            if self.output.check(inputs, resume=True) is None:
                return False
        except UsageError:
            return False  # said in its turn, after the model's own checks
        metadata = self._read_metadata()
        recorded = _same_shape(metadata["settings"], self.settings)
        self._check_settings(
            recorded, self.metadata_path, "pass --overwrite_output_file to replace it, or another --output_file"
        )
        if self.request is None or metadata.get("state") != COMPLETE or metadata.get("request") != self.request:
            return False
        if os.path.lexists(self.parts) or metadata["output"]["skipped_missing_videos"]:
            return False  # a run to finish, or clips whose video may be there now
        # Every row read and checked, as a resumed run reads them: an edited or damaged output is named, not kept.
        return len(self.read_finished()[1]) == metadata["output"].get("rows")

    def _check_settings(self, theirs: dict, source: Path, hint: str) -> None:
        if theirs != self.settings:
            found = differences(self.settings, theirs, SETTINGS_ORDER)
            more = f", and {len(found) - 3} more" if len(found) > 3 else ""
            raise UsageError(
                f"{source} holds predictions made with other settings ({'; '.join(found[:3])}{more}); {hint}"
            )

    def prepare(self, previous: OutputRecord | None = None) -> None:
        """Before the processes predict (by the process that holds the lock): the record says the output is being
        written, and the part files are started, or those of these settings resumed.

        The record keeps its `output` section only when the output's rows are resumed (same
        settings, no `overwrite`): without it, the file is not taken for rows of these settings.
        With `overwrite`, the part files of an unfinished run with other settings (allowed by
        `check`) are removed first; those of these settings stay: a run that replaces an output
        resumes like any other.
        """
        if self.overwrite and self.parts.exists():
            try:
                same = self._read_parts_settings() == self.settings
            except DataError:
                same = False
            if not same:
                shutil.rmtree(self.parts)
        working_folder(self.parts, self.output.flag, self.output.given)
        if not self.settings_path.exists():
            write_json(self.settings_path, self.settings)
        metadata = None if self.overwrite or not self.path.is_file() else self._read_metadata()
        resumed = {"output": metadata["output"]} if metadata is not None and "output" in metadata else {}
        self.output.record = None  # a new record: an earlier output's sections are not carried over
        self.output.write_record(RUNNING, settings=self.settings, request=self.request, **resumed)

    def _rows(self) -> dict[ClipKey, tuple[dict, str]]:
        """Every row written with these settings, by clip, with where it was read: the output's, then the part files'.

        A later row replaces an earlier one, except that a skipped clip never replaces a predicted one.
        """
        rows = {}

        def add(row: dict, where: str) -> None:
            if not row.get(SKIPPED) or clip_key(row) not in rows:
                rows[clip_key(row)] = (row, where)

        metadata = None if self.overwrite or not self.path.is_file() else self._read_metadata()
        if metadata is not None and "output" in metadata:  # else the file is not (yet) of these settings
            for row, where in self.read_finished()[1]:
                add(row, where)
        for part in self.part_paths():
            for row, where in self._read_rows(part):
                add(row, where)
        return rows

    def read_finished(self) -> tuple[dict, list[tuple[dict, str]]]:
        """The settings and rows of the finished output, each row checked and with where it was read; a clip skipped
        for a missing video is marked `SKIPPED`, as in the part files."""
        metadata = self._read_metadata()
        if "output" not in metadata:
            raise DataError(
                f"{self.metadata_path}: the run that writes {self.path.name} did not finish ({metadata['state']})"
            )
        skipped = set(metadata["output"]["skipped_missing_videos"])
        rows = [
            (row | ({SKIPPED: True} if clip_key(row) in skipped else {}), where)
            for row, where in self._read_rows(self.path)
        ]
        return metadata["settings"], rows

    def done(self) -> set[ClipKey]:
        """The clips already predicted with these settings (a clip skipped for a missing video is not done)."""
        return {key for key, (row, _) in self._rows().items() if not row.get(SKIPPED)}

    def append(self, rank: int, rows: Sequence[dict]) -> None:
        """Write one batch of rows of process `rank`, as a new part file (atomically: whole or not at all)."""
        if rank not in self._next_batch:
            written = [int(part.stem.rsplit("-", 1)[1]) for part in self.parts.glob(f"rank-{rank}-*.jsonl")]
            self._next_batch[rank] = max(written, default=-1) + 1
        write_jsonl(self.parts / f"rank-{rank}-{self._next_batch[rank]:06d}.jsonl", rows)
        self._next_batch[rank] += 1

    def merge(self, keys: Sequence[ClipKey], num_beams: int) -> dict:
        """Write the output (one row per clip of `keys`, in that order) and its metadata; remove the part files.

        Returns the metadata's `output` section.
        """
        rows = self._rows()
        missing = [key for key in keys if key not in rows]
        if missing:
            raise RuntimeError(f"{len(missing)} clips have no prediction after the run, the first {missing[0]}")
        # The replies of models that reply in words are kept, in every row.
        keeps_replies = any("raw" in rows[key][0] for key in keys)
        for key in keys:
            row, where = rows[key]
            if num_beams > 1 and "candidates" not in row:
                raise DataError(f"{where}: field 'candidates' is missing (the run has {num_beams} beams)")
            if keeps_replies and "raw" not in row:
                raise DataError(f"{where}: field 'raw' is missing (the other rows keep the model's replies)")
        fields = (*ROW_FIELDS, *(("candidates",) if num_beams > 1 else ()), *(("raw",) if keeps_replies else ()))
        skipped = [list(key) for key in keys if rows[key][0].get(SKIPPED)]
        output = {"rows": len(keys), "skipped_missing_videos": skipped}
        write_jsonl(self.path, ({field: rows[key][0][field] for field in fields} for key in keys))
        self.output.write_record(COMPLETE, settings=self.settings, output=output)
        shutil.rmtree(self.parts, ignore_errors=True)
        return output

    def _read_metadata(self) -> dict:
        """The output's record, checked: `settings` an object; `output` (when the file holds rows of those
        settings) with `skipped_missing_videos`, a list of clips."""
        path = self.metadata_path
        metadata = self._read_json(path)
        if not isinstance(metadata, dict):
            raise DataError(f"{path}: expected a JSON object, got {type(metadata).__name__}")
        required = ("settings", "output") if metadata.get("state") == COMPLETE else ("settings",)
        for field in ("settings", "output"):
            if (field in required or field in metadata) and not isinstance(metadata.get(field), dict):
                problem = "is missing" if field not in metadata else "must be an object"
                raise DataError(f"{path}: field '{field}' {problem}")
        if "output" not in metadata:
            return metadata
        skipped = metadata["output"].get("skipped_missing_videos")
        if not isinstance(skipped, list):
            raise DataError(f"{path}: field 'output.skipped_missing_videos' must be a list of clips")
        for index, clip in enumerate(skipped):
            if not (isinstance(clip, list) and [type(value) for value in clip] == [str, int, int]):
                raise DataError(
                    f"{path}: field 'output.skipped_missing_videos', item {index}: expected "
                    f"[video_id, video_start_time, video_end_time], got {json.dumps(clip)[:60]}"
                )
        metadata["output"]["skipped_missing_videos"] = [tuple(clip) for clip in skipped]
        return metadata

    def _read_parts_settings(self) -> dict:
        settings = self._read_json(self.settings_path)
        if not isinstance(settings, dict):
            raise DataError(f"{self.settings_path}: expected a JSON object, got {type(settings).__name__}")
        return settings

    @staticmethod
    def _read_json(path: Path):
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise DataError(f"{path}: not valid JSON ({error})") from error

    @staticmethod
    def _read_rows(path: Path) -> Iterator[tuple[dict, str]]:
        """The rows of a JSON Lines file, each checked (`check_row`), with where it was read ('FILE: line N')."""
        with path.open("rb") as file:
            for number, line in enumerate(file, start=1):
                where = f"{path}: line {number}"
                try:
                    row = json.loads(line)
                except (UnicodeDecodeError, json.JSONDecodeError) as error:
                    raise DataError(f"{where}: not valid JSON ({error})") from error
                yield check_row(row, where), where
