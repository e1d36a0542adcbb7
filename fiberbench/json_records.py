"""JSON records files (a JSON array of objects, or JSON Lines): read one record at a time, written atomically.

Errors are `DataError`s naming the file and the record. A file that cannot be read on (broken JSON
syntax, an array never closed) raises; a record that can be told apart from its neighbours but not
used (bytes that are not UTF-8, nesting deeper than Python's JSON decoder goes, an integer longer
than `int` reads, a value that is not an object) is a `JsonRecordError` in its place, which a reader
that skips bad records (`--skip_invalid`) skips, reading on.
"""

import itertools
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from .errors import DataError
from .outputs import atomic_path, write_jsonl

_DECODER = json.JSONDecoder()
_WHITE_SPACE = re.compile(r"[ \t\n\r]*")
# Files are decoded with errors="surrogateescape": each byte that is not UTF-8 becomes one lone surrogate in this
# range, so that the record holding it is named (and can be skipped) instead of the whole file failing.
NOT_UTF8_PATTERN = re.compile("[\udc80-\udcff]")


class JsonRecordError(DataError):
    """One record of a JSON records file that cannot be used; the records after it can still be read."""

    def __init__(self, path: str | os.PathLike, index: int, problem: str) -> None:
        self.path, self.index, self.problem = str(path), index, problem
        super().__init__(f"{path}: record {index}: {problem}")


def too_long_integer() -> str:
    """The problem of a JSON integer that Python refuses to read (`json` raises a ValueError for an integer of more
    digits than `sys.get_int_max_str_digits()`)."""
    return f"an integer too long to read (more than {sys.get_int_max_str_digits():,} digits)"


# A JSON string, escapes included, to be passed over when counting brackets; one never closed runs to the end of the
# text, so that each character is looked at once (a match tried again from each later quote made it quadratic).
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.?)*+(?:"|\Z)', re.DOTALL)


def nesting_depth(text: str) -> int:
    """How deeply the arrays and objects of JSON `text` nest, counted in linear time without decoding it: the C decoder
    recurses once per level, and in a thread of small stack (a web server's) a few hundred levels crash the process.

    >>> nesting_depth('{"a": [[1], "]]]"]}')
    3
    """
    brackets = re.sub(r"[^\[\]{}]", "", _JSON_STRING.sub("", text))
    return max(itertools.accumulate(1 if bracket in "[{" else -1 for bracket in brackets), default=0)


def _not_utf8(match: re.Match) -> str:
    return f"holds bytes that are not UTF-8 text (byte 0x{ord(match.group()) - 0xDC00:02x})"


def read_json_values(path: str | os.PathLike) -> Iterator[object]:
    """The values of a JSON array file, or of a JSON Lines file, one at a time (a `JsonRecordError` in the place of a
    value that cannot be used); a file that cannot be read on raises a `DataError`.

    The format is told by the first character ('[' for an array); a UTF-8 byte order mark is allowed.
    The file's text is read whole: FIBER's largest input, VaTeX's captions, is tens of megabytes.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8-sig", errors="surrogateescape")
    position = _WHITE_SPACE.match(text).end()
    is_array = text.startswith("[", position)
    if is_array:
        position = _WHITE_SPACE.match(text, position + 1).end()
    index = 0
    while position < len(text):
        if is_array and text[position] == "]":
            if _WHITE_SPACE.match(text, position + 1).end() < len(text):
                raise DataError(f"{path}: unexpected content after the closing ']'")
            return
        value, position = _decode(text, position, path, index)
        yield value
        position = _WHITE_SPACE.match(text, position).end()
        if is_array and text.startswith(",", position):
            position = _WHITE_SPACE.match(text, position + 1).end()
        elif is_array and position < len(text) and text[position] != "]":
            raise DataError(f"{path}: expected ',' or ']' after record {index}")
        index += 1
    if is_array:
        raise DataError(f"{path}: the JSON array is not closed (file cut short?)")


def _decode(text: str, position: int, path: Path, index: int) -> tuple[object, int]:
    """The value at `position` (or the `JsonRecordError` in its place) and where it ends."""
    try:
        value, end = _DECODER.raw_decode(text, position)
    except json.JSONDecodeError as error:
        if match := NOT_UTF8_PATTERN.match(text, error.pos):
            raise DataError(f"{path}: record {index}: {_not_utf8(match)}") from None
        raise DataError(f"{path}: record {index}: invalid JSON at character {error.pos}: {error.msg}") from None
    except RecursionError:
        problem = "nested too deeply to decode (more than about 1,000 levels)"
        return JsonRecordError(path, index, problem), _end_of_container(text, position, path, index)
    except ValueError:  # not a JSONDecodeError: an integer longer than int() reads
        if text[position] not in "[{":
            raise DataError(f"{path}: record {index}: {too_long_integer()}") from None
        return JsonRecordError(path, index, too_long_integer()), _end_of_container(text, position, path, index)
    if match := NOT_UTF8_PATTERN.search(text, position, end):
        return JsonRecordError(path, index, _not_utf8(match)), end
    return value, end


def _end_of_container(text: str, position: int, path: Path, index: int) -> int:
    """Where the array or object at `position` ends, found by counting brackets outside strings: for a value the
    decoder cannot read, so that the records after it are read on."""
    depth, in_string, escaped = 0, False, False
    for cursor in range(position, len(text)):
        char = text[cursor]
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth == 0:
                return cursor + 1
    raise DataError(f"{path}: record {index}: the file ends inside it (file cut short?)")


def check_object(value: object, path: str | os.PathLike, index: int) -> dict:
    """`value` itself when it is a JSON object; otherwise a `JsonRecordError` is raised (or the one it is)."""
    if isinstance(value, JsonRecordError):
        raise value
    if not isinstance(value, dict):
        raise JsonRecordError(path, index, f"expected a JSON object, got {type(value).__name__}")
    return value


def read_json_records(path: str | os.PathLike) -> Iterator[dict]:
    """The objects of a JSON array or JSON Lines file, one at a time; any bad record raises."""
    for index, value in enumerate(read_json_values(path)):
        yield check_object(value, path, index)


def write_json_records(path: str | os.PathLike, records: Iterable[dict]) -> int:
    """Write `records` as a JSON array, one record a line (JSON Lines when `path` ends in .jsonl), atomically; text
    as UTF-8, NaN and infinity refused (they are not JSON). Returns the number of records."""
    if Path(path).suffix == ".jsonl":
        return write_jsonl(path, records)
    count = 0
    with atomic_path(path) as temporary, temporary.open("w", encoding="utf-8") as file:
        file.write("[\n")
        for count, record in enumerate(records, start=1):
            file.write((",\n" if count > 1 else "") + json.dumps(record, ensure_ascii=False, allow_nan=False))
        file.write("\n]\n" if count else "]\n")
    return count
