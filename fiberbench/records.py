"""The FIBER record schema: release-format records, category rows and video feature files, checked.

Every check raises `InvalidRecordError`, whose message names the file, the record index and the
field, so that a bad record in a 28,000-record file can be found at once. The builder, the data
tools, the scorers and the lmms-eval task read records through these functions.
"""

import csv
import hashlib
import re
from pathlib import Path
from typing import Any

import numpy as np

from .errors import DataError, quoted
from .json_records import NOT_UTF8_PATTERN, read_json_records
from .metric import normalize_answer

# The blank of a masked caption, as the release writes it. The model's processor has its own copy
# (`fiberbench.modeling.processing_fiber.BLANK`, the same string): its file ships alone with every model.
BLANK = "_____"
VIDEO_FEATURE_SIZE = 1024
# Times are stored as int32 (seconds into the video); larger ones cannot be written.
MAX_TIME = 2**31 - 1
# A time written as text: ASCII digits only (`str.isdigit` takes "²", which `int` refuses, and `int`
# takes fullwidth "１２３"), and few enough that `int` never meets Python's limit of 4,300 digits.
TIME_TEXT_PATTERN = re.compile(r"[0-9]{1,%d}" % len(str(MAX_TIME)))
# A YouTube-style id. Anything else (a `/`, `\`, `..`) could escape the features folder when the
# id is turned into a file name, so ids are checked before any path is built from them.
VIDEO_ID_PATTERN = re.compile(r"[A-Za-z0-9_-]+")
# A run of five or more underscores: a blank, well formed only when it is exactly `_____`.
UNDERSCORE_RUN_PATTERN = re.compile(r"_{5,}")
# A .npz archive is a zip file: its first bytes.
ZIP_MAGIC = b"PK\x03\x04"
# The columns of a dataset's splits that a row cannot do without where the dataset has them.
REQUIRED_NON_NULL = ("video_id", "masked_caption", "label", "video_features")

# A clip as the release identifies it: (video_id, video_start_time, video_end_time).
ClipKey = tuple[str, int, int]


class InvalidRecordError(DataError):
    """A record (or category row, or feature file) that breaks the release format.

    `index` and `field` are None for errors of a whole file (not JSON, a missing column).
    """

    def __init__(self, file: str, index: int | None, field: str | None, problem: str) -> None:
        self.file, self.index, self.field, self.problem = file, index, field, problem
        where = [file] + ([f"record {index}"] if index is not None else []) + ([f"field '{field}'"] if field else [])
        super().__init__(": ".join(where + [problem]))


def whole_seconds(value: Any, *, text: bool = False) -> int:
    """A clip's time: whole seconds from 0 to `MAX_TIME`, a JSON integer (not a bool) or, with `text` (a CSV cell),
    ASCII digits; anything else is a ValueError saying what a time is and what `value` was.

    The one definition of a time, for the dataset's records, predictions files and crowd answers.
    """
    if text and isinstance(value, str) and TIME_TEXT_PATTERN.fullmatch(value.strip()):
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TIME:
        return value
    raise ValueError(f"must be a whole number of seconds from 0 to {MAX_TIME:,}, got {quoted(value)}")


def check_plain_video_id(video_id: str) -> str:
    """The id itself if it is a plain YouTube-style id (`[A-Za-z0-9_-]+`), else a ValueError saying why.

    Every reader of ids checks them (the builder, `blank`, `fiberbench.data.load_fiber`): an id is
    part of file names, and `../x` or `/x` would lead out of the folder it is looked up in.
    """
    if not VIDEO_ID_PATTERN.fullmatch(video_id):
        raise ValueError(f"{video_id[:100]!r} is not a plain video id (only A-Z, a-z, 0-9, '_' and '-')")
    return video_id


def _typed(record: dict, field: str, expected: type, file: str, index: int) -> Any:
    value = record[field]
    # `bool` is a subclass of `int`, but `true` is no time in seconds.
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise InvalidRecordError(file, index, field, f"expected {expected.__name__}, got {type(value).__name__}")
    return value


def validate_video_id(video_id: Any, *, file: str, index: int) -> str:
    """The id itself if it is a plain YouTube-style id (`check_plain_video_id`)."""
    video_id = _typed({"video_id": video_id}, "video_id", str, file, index)
    try:
        return check_plain_video_id(video_id)
    except ValueError as error:
        raise InvalidRecordError(file, index, "video_id", str(error)) from None


def _time(record: dict, field: str, file: str, index: int) -> int:
    try:
        return whole_seconds(record[field])
    except ValueError as error:
        raise InvalidRecordError(file, index, field, str(error)) from None


def _additional_answers(record: dict, file: str, index: int) -> list[list[str]]:
    field = "additional_answers"
    value = _typed({field: record.get(field, [])}, field, list, file, index)
    for annotator, answers in enumerate(value):
        if not isinstance(answers, list) or not answers:
            raise InvalidRecordError(file, index, field, f"annotator {annotator}: expected a non-empty list of answers")
        for position, answer in enumerate(answers):
            if not isinstance(answer, str) or not answer.strip():
                problem = f"annotator {annotator}, answer {position}: expected a non-empty string"
                raise InvalidRecordError(file, index, field, problem)
    return value


def validate_record(record: Any, *, file: str, index: int) -> dict[str, Any]:
    """Check one release-format record and return its example fields (without category or features).

    `additional_answers` may be absent (as in train) and becomes `[]`; `caption` may be absent and
    becomes None, but when present the label put into the blank must give it back.
    """
    if not isinstance(record, dict):
        raise InvalidRecordError(file, index, "(record)", f"expected a JSON object, got {type(record).__name__}")
    for field in ("video_id", "video_start_time", "video_end_time", "masked_caption", "label"):
        if field not in record:
            raise InvalidRecordError(file, index, field, "missing")
    video_id = validate_video_id(record["video_id"], file=file, index=index)
    start, end = _time(record, "video_start_time", file, index), _time(record, "video_end_time", file, index)
    if start >= end:
        problem = f"must be greater than video_start_time ({end} <= {start})"
        raise InvalidRecordError(file, index, "video_end_time", problem)
    masked_caption = _typed(record, "masked_caption", str, file, index)
    blanks = UNDERSCORE_RUN_PATTERN.findall(masked_caption)
    if blanks != [BLANK]:
        problem = f"expected exactly one blank {BLANK!r}, found {blanks or 'none'}"
        raise InvalidRecordError(file, index, "masked_caption", problem)
    label = _typed(record, "label", str, file, index)
    if not label.strip():
        raise InvalidRecordError(file, index, "label", "empty")
    if not normalize_answer(label):
        problem = f"{quoted(label)} normalizes to nothing (only articles, punctuation and spaces)"
        raise InvalidRecordError(file, index, "label", f"{problem}: nothing scores against it")
    caption = record.get("caption")
    if caption is not None:
        _typed(record, "caption", str, file, index)
        if masked_caption.replace(BLANK, label) != caption:
            problem = f"the label {label!r} put into the blank does not give the caption {caption!r}"
            raise InvalidRecordError(file, index, "caption", problem)
    clip = {"video_id": video_id, "video_start_time": start, "video_end_time": end}
    text = {"caption": caption, "masked_caption": masked_caption, "label": label}
    return clip | text | {"additional_answers": _additional_answers(record, file, index)}


def read_release_records(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a release-format file (JSON array or JSON Lines), each checked by `validate_record`."""
    records = enumerate(read_json_records(path))
    return [validate_record(record, file=str(path), index=index) for index, record in records]


def read_category_rows(path: str | Path, *, file: str) -> list[dict[str, str]]:
    """The rows of a tab-separated category file whose header row names `video_id` and `category` (the release's
    files have other columns too, which are ignored).

    A UTF-8 byte order mark and Windows line ends are accepted; bytes that are not UTF-8 are kept
    (as lone surrogates) for `validate_category_row` to report in the row that holds them.
    """
    with open(path, newline="", encoding="utf-8-sig", errors="surrogateescape") as stream:
        reader = csv.DictReader(stream, delimiter="\t")
        header = reader.fieldnames or ()
        if any(NOT_UTF8_PATTERN.search(name) for name in header):
            raise InvalidRecordError(file, None, None, "the header row holds bytes that are not UTF-8 text")
        missing = {"video_id", "category"} - set(header)
        if missing:
            raise InvalidRecordError(file, None, None, f"no {' or '.join(sorted(missing))} column in the header row")
        return list(reader)


def validate_category_row(row: dict[str, str], *, file: str, index: int) -> tuple[str, str]:
    """(video_id, category) of one category row."""
    for field in ("video_id", "category"):
        if row.get(field) is not None and NOT_UTF8_PATTERN.search(row[field]):
            raise InvalidRecordError(file, index, field, "holds bytes that are not UTF-8 text")
    video_id = validate_video_id(row["video_id"], file=file, index=index)
    category = (row["category"] or "").strip()
    if not category:
        raise InvalidRecordError(file, index, "category", "empty")
    return video_id, category


def load_video_features(path: Path, *, file: str, index: int, feature_size: int = VIDEO_FEATURE_SIZE) -> np.ndarray:
    """The clip's features as float32 (T, D), from a `.npy` of shape (1, T, D): the release's I3D layout (D = 1024),
    which `fiberbench extract-features` writes too (D = `feature_size`). Never a pickle.

    The file must lie in its features folder (`path.parent`): a symbolic link that leads out of
    it is refused, so that a crafted folder cannot make the build read (and publish) other files.
    """
    def invalid(problem: str) -> InvalidRecordError:
        return InvalidRecordError(file, index, "video_features", problem)

    if path.is_dir():
        raise invalid(f"{path} is a folder, not a .npy file")
    if not path.is_file():
        raise invalid(f"feature file not found: {path}")
    if not path.resolve().is_relative_to(path.parent.resolve()):
        raise invalid(f"{path} is a symbolic link to {path.resolve()}, outside the features folder")
    try:
        with open(path, "rb") as stream:
            if stream.read(len(ZIP_MAGIC)) == ZIP_MAGIC:
                raise ValueError("it is a .npz (zip) archive")
            stream.seek(0)
            features = np.lib.format.read_array(stream, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise invalid(f"{path}: not a readable .npy array ({error})") from error
    if features.ndim != 3 or features.shape[0] != 1 or features.shape[1] < 1 or features.shape[2] != feature_size:
        raise invalid(f"{path.name}: expected shape (1, T, {feature_size}), got {features.shape}")
    if not np.issubdtype(features.dtype, np.floating):
        raise invalid(f"{path.name}: expected floats, got {features.dtype}")
    # Checked after the cast: float64 values beyond float32's range (about 3.4e38) become infinite.
    with np.errstate(over="ignore"):
        features = features[0].astype(np.float32, copy=False)
    if not np.isfinite(features).all():
        raise invalid(f"{path.name}: contains NaN or infinite values (or values beyond float32's range)")
    return features


# The fields that name a blank's clip, in the dataset and in every predictions file.
KEY_FIELDS = ("video_id", "video_start_time", "video_end_time")


def clip_key(record: dict) -> ClipKey:
    """The (video_id, video_start_time, video_end_time) of a release-format record."""
    return record["video_id"], record["video_start_time"], record["video_end_time"]


def clip_id(video_id: str, start: int, end: int) -> str:
    """VaTeX's id of a clip, `{video_id}_{start:06d}_{end:06d}`: the stem of its feature (and video) files."""
    return f"{video_id}_{start:06d}_{end:06d}"


def clips_fingerprint(clip_ids) -> str:
    """A short name of a set of clips (`clip_id`s), the same for the same set in any order: two labs whose
    predictions answer the same clips of a split (the clips whose videos they hold) have the same fingerprint.

    >>> clips_fingerprint(["b_000001_000011", "a_000000_000010"]) == clips_fingerprint(["a_000000_000010", "b_000001_000011"])
    True
    """
    return "sha256:" + hashlib.sha256("\n".join(sorted(set(clip_ids))).encode()).hexdigest()[:16]


def feature_file_name(video_id: str, start: int, end: int) -> str:
    """The release's I3D file name for a clip: `{video_id}_{start:06d}_{end:06d}.npy`."""
    return f"{clip_id(video_id, start, end)}.npy"


def check_tables(tables: dict, flag: str) -> None:
    """The checks of a dataset's splits (`tables`: each split's name to its Arrow table) before any work: no null text
    or features (a null reaches a model as a shape error far from its row), and plain video ids (`predict` would make
    `../outside/evil` a path out of --video_dir); else a `DataError` naming the first bad row, however it was read."""
    for name, table in tables.items():
        for column in REQUIRED_NON_NULL:
            if column in table.column_names and table.column(column).null_count:
                row = table.column(column).to_pylist().index(None)
                raise DataError(f"{flag}: split {name}, row {row}: field {column!r} is null")
        video_ids = table.column("video_id").to_pylist() if "video_id" in table.column_names else []
        for row, video_id in enumerate(video_ids):
            try:
                check_plain_video_id(video_id)
            except ValueError as error:
                raise DataError(f"{flag}: split {name}, row {row}: field 'video_id': {error}") from None
