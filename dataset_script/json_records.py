"""Stream JSON records (a JSON array of objects, or JSON Lines) in and out, and write files atomically.

VaTeX-style caption files are single JSON arrays; reading them with `json.load` needs the whole
corpus in memory. `read_json_records` decodes one object at a time from a bounded buffer, and
`write_json_records` writes one record per line as they come, atomically (`fiberbench.files`).
"""

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from fiberbench.files import atomic_path

_CHUNK_CHARS = 1 << 16
_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\n\r"


class _Buffer:
    """A window on a text file: `text[position:]` is what is read and not yet consumed."""

    def __init__(self, file):
        self.file = file
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

    def decode(self, path: Path, index: int) -> object:
        """Decode the JSON value at the current position, reading more until it is complete."""
        while True:
            try:
                value, end = _DECODER.raw_decode(self.text, self.position)
            except json.JSONDecodeError as error:
                # An incomplete value fails to decode too: read on, and only report the error
                # once the file has nothing more to give.
                offset = self.consumed + error.pos
                if self.fill():
                    continue
                raise ValueError(f"{path}: record {index}: invalid JSON at character {offset}: {error.msg}") from error
            # A number at the buffer's end could be cut short ("12" of "123"): make sure the
            # value is followed by something before trusting it.
            if end == len(self.text) and self.fill():
                continue
            self.position = end
            return value


def read_json_records(path: str | os.PathLike) -> Iterator[dict]:
    """Yield the objects of a JSON array file, or of a JSON Lines file, one at a time.

    The format is told by the first character ('[' for an array). Memory stays bounded by the
    largest record, not the file.
    """
    path = Path(path)
    with path.open(encoding="utf-8") as file:
        buffer = _Buffer(file)
        is_array = buffer.peek() == "["
        if is_array:
            buffer.position += 1
        index = 0
        while (next_char := buffer.peek()) != "":
            if is_array and next_char == "]":
                buffer.position += 1
                if buffer.peek() != "":
                    raise ValueError(f"{path}: unexpected content after the closing ']'")
                return
            record = buffer.decode(path, index)
            if not isinstance(record, dict):
                raise ValueError(f"{path}: record {index}: expected a JSON object, got {type(record).__name__}")
            yield record
            index += 1
            if is_array:
                separator = buffer.peek()
                if separator == ",":
                    buffer.position += 1
                elif separator not in ("]", ""):
                    raise ValueError(f"{path}: expected ',' or ']' after record {index - 1}")
        if is_array:
            raise ValueError(f"{path}: the JSON array is not closed (file cut short?)")


def read_records_with_fields(path: str | os.PathLike, fields: Iterable[str]) -> list[dict]:
    """All the records of a (small) file, each checked to have `fields`; an error names the first gap."""
    records = list(read_json_records(path))
    for index, record in enumerate(records):
        for name in fields:
            if name not in record:
                raise ValueError(f"{path}: record {index}: field {name!r} is missing")
    return records


def write_json_records(path: str | os.PathLike, records: Iterable[dict]) -> int:
    """Write `records` as a JSON array (JSON Lines when `path` ends in .jsonl), atomically.

    Records are written one per line as they come, so the output is never held in memory.
    Returns the number of records written.
    """
    opening, separator, closing = ("", "\n", "\n") if Path(path).suffix == ".jsonl" else ("[\n", ",\n", "\n]\n")
    count = 0
    with atomic_path(path) as temporary, temporary.open("w", encoding="utf-8") as file:
        file.write(opening)
        for count, record in enumerate(records, start=1):
            file.write((separator if count > 1 else "") + json.dumps(record))
        file.write(closing if count else closing.lstrip("\n"))
    return count
