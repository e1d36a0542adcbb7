"""Stream JSON records (a JSON array of objects, or JSON Lines) in and out, and write files atomically.

VaTeX-style caption files are single JSON arrays; reading them with `json.load` needs the whole
corpus in memory. `read_json_values` decodes one value at a time from a bounded buffer, and
`write_json_records` writes one record per line as they come, atomically (`fiberbench.files`).

Errors are `DataError`s naming the file and the record. A file that cannot be read on (broken
JSON syntax, an array never closed) raises; a record that can be told apart from its neighbours
but not used (bytes that are not UTF-8, nesting deeper than Python's JSON decoder goes, a value
that is not an object) is a `JsonRecordError`, which callers that skip bad records can skip.
"""

import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from fiberbench.errors import DataError
from fiberbench.files import atomic_path, write_jsonl

_CHUNK_CHARS = 1 << 16
_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\n\r"
# Files are decoded with errors="surrogateescape": each byte that is not UTF-8 becomes one lone
# surrogate in this range, so the bad record can be named (and skipped) instead of the whole file failing.
NOT_UTF8_PATTERN = re.compile("[\udc80-\udcff]")


class JsonRecordError(DataError):
    """One record of a JSON records file that cannot be used; the records after it can still be read."""

    def __init__(self, path: str | os.PathLike, index: int, problem: str) -> None:
        self.path, self.index, self.problem = str(path), index, problem
        super().__init__(f"{path}: record {index}: {problem}")


def too_long_integer() -> str:
    """The problem of a JSON integer that Python refuses to read: `json` raises a ValueError, "Exceeds the limit
    (4300 digits) for integer string conversion", for any integer longer than `sys.get_int_max_str_digits()`."""
    return f"an integer too long to read (more than {sys.get_int_max_str_digits():,} digits)"


def _not_utf8_problem(match: re.Match) -> str:
    return f"holds bytes that are not UTF-8 text (byte 0x{ord(match.group()) - 0xDC00:02x})"


class _Buffer:
    """A window on a text file: `text[position:]` is what is read and not yet consumed."""

    def __init__(self, file, path: Path):
        self.file = file
        self.path = path
        self.text = ""
        self.position = 0
        self.consumed = 0  # characters dropped from the front, to report file offsets

    def fill(self) -> bool:
        """Read more of the file; False at its end.

        The consumed prefix is dropped first, and at least as much as is left unconsumed is read,
        so a value larger than the buffer doubles it instead of being re-decoded chunk by chunk.
        """
        self.consumed += self.position
        self.text = self.text[self.position :]
        self.position = 0
        chunk = self.file.read(max(_CHUNK_CHARS, len(self.text)))
        self.text += chunk
        return bool(chunk)

    def peek(self) -> str:
        """The next non-white-space character ('' at the end of the file), not consumed."""
        while True:
            while self.position < len(self.text) and self.text[self.position] in _WHITESPACE:
                self.position += 1
            if self.position < len(self.text) or not self.fill():
                return self.text[self.position : self.position + 1]

    def decode(self, index: int) -> object:
        """Decode the JSON value at the current position, reading more until it is complete.

        Returns a `JsonRecordError` (not raised) for a value whose end is known but that cannot be used.
        """
        while True:
            try:
                value, end = _DECODER.raw_decode(self.text, self.position)
            except json.JSONDecodeError as error:
                # An incomplete value fails to decode too: read on, and only report the error
                # once the file has nothing more to give.
                offset = self.consumed + error.pos
                not_utf8 = NOT_UTF8_PATTERN.match(self.text, error.pos)
                if self.fill():
                    continue
                if not_utf8:
                    raise DataError(f"{self.path}: record {index}: {_not_utf8_problem(not_utf8)}") from None
                raise DataError(f"{self.path}: record {index}: invalid JSON at character {offset}: {error.msg}") from None
            except RecursionError:
                self.position = self._end_of_container(index)
                return JsonRecordError(self.path, index, "nested too deeply to decode (more than about 1,000 levels)")
            except ValueError:  # not a JSONDecodeError (caught above): an integer longer than int() reads
                problem = too_long_integer()
                if self.text[self.position] not in "[{":
                    raise DataError(f"{self.path}: record {index}: {problem}") from None
                self.position = self._end_of_container(index)
                return JsonRecordError(self.path, index, problem)
            # A number at the buffer's end could be cut short ("12" of "123"): make sure the
            # value is followed by something before trusting it.
            if end == len(self.text) and self.fill():
                continue
            start, self.position = self.position, end
            if match := NOT_UTF8_PATTERN.search(self.text, start, end):
                return JsonRecordError(self.path, index, _not_utf8_problem(match))
            return value

    def _end_of_container(self, index: int) -> int:
        """Where the array or object at the current position ends, found by counting brackets outside strings.

        For a value too deeply nested for the decoder: the records after it can then be read on.
        """
        depth, in_string, escaped, cursor = 0, False, False, self.position
        while True:
            if cursor == len(self.text):
                shift = self.position
                if not self.fill():
                    raise DataError(f"{self.path}: record {index}: the file ends inside it (file cut short?)")
                cursor -= shift
                continue
            char = self.text[cursor]
            cursor += 1
            if in_string:
                escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
            elif char == '"':
                in_string = True
            elif char in "[{":
                depth += 1
            elif char in "]}":
                depth -= 1
                if depth == 0:
                    return cursor


def read_json_values(path: str | os.PathLike) -> Iterator[object]:
    """Yield the values of a JSON array file, or of a JSON Lines file, one at a time.

    The format is told by the first character ('[' for an array); a UTF-8 byte order mark is
    allowed. Memory stays bounded by the largest record, not the file. A record that cannot be used
    but whose end is known is yielded as a `JsonRecordError` in its place, so that the caller can
    skip it or raise it; a file that cannot be read on raises a `DataError`.
    """
    path = Path(path)
    with path.open(encoding="utf-8-sig", errors="surrogateescape") as file:
        buffer = _Buffer(file, path)
        is_array = buffer.peek() == "["
        if is_array:
            buffer.position += 1
        index = 0
        while (next_char := buffer.peek()) != "":
            if is_array and next_char == "]":
                buffer.position += 1
                if buffer.peek() != "":
                    raise DataError(f"{path}: unexpected content after the closing ']'")
                return
            yield buffer.decode(index)
            index += 1
            if is_array:
                separator = buffer.peek()
                if separator == ",":
                    buffer.position += 1
                elif separator not in ("]", ""):
                    raise DataError(f"{path}: expected ',' or ']' after record {index - 1}")
        if is_array:
            raise DataError(f"{path}: the JSON array is not closed (file cut short?)")


def check_object(value: object, path: str | os.PathLike, index: int) -> dict:
    """`value` itself when it is a JSON object; otherwise a `JsonRecordError` is raised (or the one it is)."""
    if isinstance(value, JsonRecordError):
        raise value
    if not isinstance(value, dict):
        raise JsonRecordError(path, index, f"expected a JSON object, got {type(value).__name__}")
    return value


def read_json_records(path: str | os.PathLike) -> Iterator[dict]:
    """Yield the objects of a JSON array or JSON Lines file, one at a time; any bad record raises."""
    for index, value in enumerate(read_json_values(path)):
        yield check_object(value, path, index)


def write_json_records(path: str | os.PathLike, records: Iterable[dict]) -> int:
    """Write `records` as a JSON array (JSON Lines when `path` ends in .jsonl), atomically.

    Records are written one per line as they come, so the output is never held in memory. As with
    `fiberbench.files.write_jsonl` (which writes the JSON Lines), text is written as UTF-8 rather
    than escaped, and NaN or infinity, which are not JSON, is refused. Returns the number of records.
    """
    if Path(path).suffix == ".jsonl":
        return write_jsonl(path, records)
    count = 0
    with atomic_path(path) as temporary, temporary.open("w", encoding="utf-8") as file:
        file.write("[\n")
        for count, record in enumerate(records, start=1):
            file.write((",\n" if count > 1 else "") + json.dumps(record, ensure_ascii=False, allow_nan=False))
        file.write("\n]\n" if count else "]\n")
    return count
