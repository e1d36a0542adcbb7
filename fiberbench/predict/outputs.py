"""The predictions file of `fiberbench predict`: written as it goes, resumable, merged in dataset order.

- `OUTPUT_FILE` (JSON Lines, what `fiberbench evaluate` reads): one row per clip of the split, in
  dataset order: `video_id`, `video_start_time`, `video_end_time`, `prediction` and, with several
  beams, `candidates` (the ranked, distinct beam answers).
- `OUTPUT_FILE` with the suffix `.metadata.json` beside it: `settings` (model id, revision and
  commit, kind, the exact prompt, decoding, dataset and split, package version: what the
  predictions depend on) and `output` (rows, clips skipped for a missing video).
- While a run goes on, each process appends its rows, batch by batch, to a hidden part file beside
  the output (`.NAME.part-RANK.jsonl`, first line: the settings). A rerun with the same settings
  reads them and the finished output, and predicts only the clips not done yet; a clip skipped for
  a missing video is tried again. At the end the rows are merged in dataset order into the output
  (atomically, through `fiberbench.files`) and the part files removed.
- Rows made with other settings are never mixed in: an output or part file of other settings is
  refused, or with `overwrite` (--overwrite_output_file) ignored, the output being replaced only
  when the new one is complete.
"""

import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

from fiberbench.errors import DataError, UsageError
from fiberbench.files import write_json, write_jsonl

logger = logging.getLogger(__name__)

ClipKey = tuple[str, int, int]
KEY_FIELDS = ("video_id", "video_start_time", "video_end_time")
SKIPPED = "skipped"  # field of a part-file row whose clip had no video; the output row has an empty prediction


def clip_key(row: dict) -> ClipKey:
    return row["video_id"], row["video_start_time"], row["video_end_time"]


def metadata_path(output_file: Path) -> Path:
    """`predictions.jsonl` -> `predictions.metadata.json`, beside it."""
    return output_file.with_name(f"{output_file.stem}.metadata.json")


def differences(ours: dict, theirs: dict, prefix: str = "") -> list[str]:
    """The settings that differ, as 'decoding.num_beams: 4 here, 8 there'."""
    found = []
    for name in sorted(set(ours) | set(theirs)):
        mine, other = ours.get(name), theirs.get(name)
        if isinstance(mine, dict) and isinstance(other, dict):
            found += differences(mine, other, f"{prefix}{name}.")
        elif mine != other:
            found.append(f"{prefix}{name}: {json.dumps(mine)[:60]} here, {json.dumps(other)[:60]} there")
    return found


class PredictionsFile:
    """The output file of one run's `settings`, its metadata sidecar and its part files."""

    def __init__(self, path: Path, settings: dict, overwrite: bool = False):
        self.path = Path(path)
        self.metadata_path = metadata_path(self.path)
        self.settings = settings
        # With `overwrite`, the rows of an earlier output are neither resumed nor kept.
        self.overwrite = overwrite

    def part_path(self, rank: int) -> Path:
        return self.path.with_name(f".{self.path.name}.part-{rank}.jsonl")

    def part_paths(self) -> list[Path]:
        return sorted(self.path.parent.glob(f".{self.path.name}.part-*.jsonl"))

    def check(self) -> None:
        """Refuse, before any work, to mix these predictions with another run's (unless `overwrite`).

        The output may be replaced only if it is one this command wrote with the same settings
        (it is then resumed) or with `overwrite`; the same for unfinished part files.
        """
        if self.path.is_dir():
            raise UsageError(f"--output_file {self.path} is a folder; give a file name")
        if self.overwrite:
            return
        hint = "pass --overwrite_output_file to replace it, or another --output_file"
        if self.path.exists():
            if not self.metadata_path.is_file():
                raise UsageError(
                    f"--output_file {self.path} exists and was not written by fiberbench predict "
                    f"(no {self.metadata_path.name} beside it); {hint}"
                )
            self._check_settings(self._read_json(self.metadata_path).get("settings"), self.metadata_path, hint)
        for part in self.part_paths():
            first = self._first_record(part)
            if first is not None:  # a part file without a whole line holds no rows
                self._check_settings(first.get("settings"), part, hint)

    def _check_settings(self, theirs, source: Path, hint: str) -> None:
        if theirs != self.settings:
            changed = "; ".join(differences(self.settings, theirs if isinstance(theirs, dict) else {})[:3])
            raise UsageError(f"{source} holds predictions made with other settings ({changed}); {hint}")

    def drop_other_runs(self) -> None:
        """With `overwrite`, remove the part files of unfinished runs with other settings (`check` allowed them).

        Part files of these settings stay: a run that replaces an output resumes like any other.
        """
        for part in self.part_paths():
            first = self._first_record(part)
            if self.overwrite and first is not None and first.get("settings") != self.settings:
                part.unlink()

    def _rows(self) -> dict[ClipKey, dict]:
        """Every row written with these settings, by clip: the finished output's, then the part files'.

        A later row replaces an earlier one, except that a skipped clip never replaces a predicted one.
        """
        rows = {}

        def add(row: dict) -> None:
            if not row.get(SKIPPED) or clip_key(row) not in rows:
                rows[clip_key(row)] = row

        if not self.overwrite and self.path.is_file():
            skipped = {tuple(clip) for clip in self._read_json(self.metadata_path)["output"]["skipped_missing_videos"]}
            for row in self._records(self.path):
                add(row | ({SKIPPED: True} if clip_key(row) in skipped else {}))
        for part in self.part_paths():
            for row in self._records(part, skip_first=True):
                add(row)
        return rows

    def done(self) -> set[ClipKey]:
        """The clips already predicted with these settings (a clip skipped for a missing video is not done)."""
        return {key for key, row in self._rows().items() if not row.get(SKIPPED)}

    def append(self, rank: int, rows: Sequence[dict]) -> None:
        """Add one batch of rows to this process's part file, in one write of whole lines."""
        part = self.part_path(rank)
        if not part.exists():
            part.parent.mkdir(parents=True, exist_ok=True)
            self._write_lines(part, [{"settings": self.settings}], mode="w")
        self._write_lines(part, rows, mode="a")

    def start_appending(self, rank: int) -> None:
        """Cut this process's part file after its last whole line (a killed run may have left half a line)."""
        part = self.part_path(rank)
        if part.exists():
            whole_lines = part.read_bytes().rfind(b"\n") + 1
            if whole_lines == 0:  # killed before its settings line was written
                part.unlink()
                return
            with part.open("r+b") as file:
                file.truncate(whole_lines)

    def merge(self, keys: Sequence[ClipKey], num_beams: int) -> dict:
        """Write the output (one row per clip of `keys`, in that order) and its metadata; remove the part files.

        Returns the metadata's `output` section.
        """
        rows = self._rows()
        missing = [key for key in keys if key not in rows]
        if missing:
            raise RuntimeError(f"{len(missing)} clips have no prediction after the run, the first {missing[0]}")
        fields = (*KEY_FIELDS, "prediction", *(("candidates",) if num_beams > 1 else ()))
        skipped = [list(key) for key in keys if rows[key].get(SKIPPED)]
        output = {"rows": len(keys), "skipped_missing_videos": skipped}
        write_jsonl(self.path, ({field: rows[key][field] for field in fields} for key in keys))
        write_json(self.metadata_path, {"settings": self.settings, "output": output})
        for part in self.part_paths():
            part.unlink()
        return output

    @staticmethod
    def _write_lines(path: Path, records: Iterable[dict], mode: str) -> None:
        text = "".join(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n" for record in records)
        with path.open(mode, encoding="utf-8") as file:
            file.write(text)
            file.flush()

    @staticmethod
    def _read_json(path: Path) -> dict:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise DataError(f"{path}: not valid JSON ({error})") from error

    @classmethod
    def _first_record(cls, path: Path) -> dict | None:
        return next(iter(cls._records(path)), None)

    @staticmethod
    def _records(path: Path, skip_first: bool = False) -> Iterable[dict]:
        """The whole lines of a JSON Lines file (a last line without its newline was cut by a kill: ignored)."""
        lines = path.read_bytes().split(b"\n")[:-1]
        for number, line in enumerate(lines[1:] if skip_first else lines, start=2 if skip_first else 1):
            try:
                yield json.loads(line)
            except (UnicodeDecodeError, json.JSONDecodeError) as error:
                raise DataError(f"{path}, line {number}: not valid JSON ({error})") from error
