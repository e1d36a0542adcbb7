"""`fiberbench blank`: blank one noun chunk per clip of captioning data, as the FIBER release was made.

The official procedure (paper §3.1): tidy each caption, take a clip's FIRST caption in which
spaCy finds a noun chunk, pick one of its noun chunks with one `random.choice` (Python's `random`
seeded with 2, clips in input order) and replace exactly that character span by `_____`. Clips
with no noun chunk are dropped. The same input, pipeline and seed give the release's records.

Parsing runs batched and, with `--num_proc`, in worker processes; the random choices are made
here, in input order, so the output does not depend on the number of processes. Input and output
are streamed, so corpora larger than memory work. spaCy and `fiberbench.modeling` (which imports
transformers) are imported where they are used, so that `fiberbench blank --help` answers at once.
"""

import argparse
import contextlib
import errno
import functools
import itertools
import logging
import os
import random
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from fiberbench.cli import add_output_arguments, positive_int
from fiberbench.collector import collector_held_off
from fiberbench.errors import DataError, UsageError
from fiberbench.helper_processes import HelperProcess
from fiberbench.ownership import Output, arguments_of
from fiberbench.records import KEY_FIELDS

from fiberbench.records import BLANK, ClipKey, check_plain_video_id
from fiberbench.json_records import JsonRecordError, read_json_values, write_json_records

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc

logger = logging.getLogger(__name__)

# The output's format is told by its suffix: a JSON array, or JSON Lines.
OUTPUT_SUFFIXES = (".json", ".jsonl")
# Clips sent to a worker at a time; a few such tasks per worker are in flight at once.
CLIPS_PER_TASK = 512
TASKS_IN_FLIGHT_PER_WORKER = 2

# A clip's first caption with noun chunks: the tidied caption and the chunks' character spans.
Candidate = tuple[str, list[tuple[int, int]]]


@dataclass(frozen=True)
class Clip:
    """One captioned clip of the input: its key (video id, start and end times) and its captions."""

    key: ClipKey
    captions: tuple[str, ...]


def tidy_caption(caption: str) -> str:
    """Strip, upper-case the first character and end with a period, as the release did."""
    caption = caption.strip()
    caption = caption[0].upper() + caption[1:]
    return caption if caption.endswith(".") else caption + "."


def parse_clip_id(clip_id: str) -> tuple[str, int, int]:
    """Split a VaTeX `videoID` "{video_id}_{start:06d}_{end:06d}"; the video id may contain "_"."""
    parts = clip_id.rsplit("_", maxsplit=2)
    if len(parts) != 3 or not (parts[0] and parts[1].isdigit() and parts[2].isdigit()):
        raise ValueError(f"expected '{{video_id}}_{{start}}_{{end}}' with integer times, got {clip_id!r}")
    video_id, start, end = parts
    return video_id, int(start), int(end)


def clip_from_record(
    record: dict,
    video_id_column: str = "videoID",
    captions_column: str = "enCap",
    max_caption_chars: int | None = None,
) -> Clip:
    """Read a clip from an input record; a ValueError names the bad field.

    `max_caption_chars`: the longest caption the spaCy pipeline takes (its `max_length`).
    """
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, got {type(record).__name__}")
    for column in (video_id_column, captions_column):
        if column not in record:
            raise ValueError(f"field {column!r} is missing (fields: {sorted(record)})")
    clip_id, captions = record[video_id_column], record[captions_column]
    if not isinstance(clip_id, str):
        raise ValueError(f"field {video_id_column!r} must be a string, got {clip_id!r}")
    if not isinstance(captions, list | tuple) or not all(isinstance(caption, str) for caption in captions):
        raise ValueError(f"field {captions_column!r} must be a list of strings, got {captions!r}")
    try:
        video_id, start, end = parse_clip_id(clip_id)
        check_plain_video_id(video_id)
    except ValueError as error:
        raise ValueError(f"field {video_id_column!r}: {error}") from None
    for position, caption in enumerate(captions):
        if max_caption_chars is not None and len(caption) > max_caption_chars:
            raise ValueError(
                f"field {captions_column!r}: caption {position} has {len(caption):,} characters, more than the "
                f"spaCy pipeline takes ({max_caption_chars:,})"
            )
    return Clip((video_id, start, end), tuple(captions))


def first_captions_with_noun_chunks(
    parse: Callable[[Iterable[str]], Iterable["Doc"]], caption_lists: list[tuple[str, ...]]
) -> list[Candidate | None]:
    """For each clip, its first tidied caption with a noun chunk and the chunks' spans (or None); `parse` gives the
    spaCy doc of each text, in order (`parse_texts` with the run's pipeline).

    Parsing goes in rounds, the first caption of every clip, then the next caption of the clips
    still without a chunk, and so on: the result is the same as parsing every caption, with about
    a tenth of the work on VaTeX (almost every first caption has a chunk). Blank captions are
    skipped (the official script failed on them).
    """
    found: list[Candidate | None] = [None] * len(caption_lists)
    pending = [
        (index, [tidy_caption(caption) for caption in captions if caption.strip()])
        for index, captions in enumerate(caption_lists)
    ]
    pending = [(index, captions) for index, captions in pending if captions]
    while pending:
        still_pending = []
        docs = parse(captions[0] for _, captions in pending)
        for (index, captions), doc in zip(pending, docs):
            spans = [(chunk.start_char, chunk.end_char) for chunk in doc.noun_chunks]
            if spans:
                found[index] = (doc.text, spans)
            elif len(captions) > 1:
                still_pending.append((index, captions[1:]))
        pending = still_pending
    return found


def blank_record(clip: Clip, candidate: Candidate, rng: random.Random) -> dict:
    """The release-format record of `clip`, with one randomly chosen noun chunk blanked."""
    caption, spans = candidate
    start, end = rng.choice(spans)
    return {
        **dict(zip(KEY_FIELDS, clip.key)),
        "caption": caption,
        "masked_caption": caption[:start] + BLANK + caption[end:],
        "label": caption[start:end],
    }


_worker_state: dict = {}


def _start_worker(pipeline_path: str, batch_size: int | None, disable: list[str]) -> None:
    """Load, in a parser process, the pipeline that this run loaded (from its folder), to parse as `parse_texts` does
    (`disable`: its `unused_components`). spaCy alone: not `fiberbench.modeling`, whose package loads transformers'
    model classes to register them, which costs a parser about 2.3 s of CPU and 115 MB more."""
    with collector_held_off():
        import spacy

        nlp = spacy.load(pipeline_path)
    _worker_state["parse"] = functools.partial(nlp.pipe, batch_size=batch_size, disable=disable)


def _find_in_worker(caption_lists: list[tuple[str, ...]]) -> list[Candidate | None]:
    return first_captions_with_noun_chunks(_worker_state["parse"], caption_lists)


def _candidates_per_batch(
    batches: Iterable[list[Clip]], nlp: "Language", num_proc: int, batch_size: int | None
) -> Iterator[tuple[list[Clip], list[Candidate | None]]]:
    """Each batch of clips with its candidates, in input order, parsed here or in `num_proc` workers.

    Only a few batches per worker are in flight, so the input is read no faster than it is
    parsed. Workers are fresh interpreters (`fiberbench.helper_processes`), not forks, so that
    pipelines running on torch are safe, and they need nothing of the caller's `__main__` (a script
    without a main guard works); each loads the parent's pipeline from its folder. Batches go to the
    workers in turn, and each answers in order.
    """
    from fiberbench.modeling.noun_phrases import parse_texts, unused_components

    if num_proc == 1:
        parse = functools.partial(parse_texts, nlp, batch_size=batch_size)
        for batch in batches:
            yield batch, first_captions_with_noun_chunks(parse, [clip.captions for clip in batch])
        return
    if nlp.path is None:
        raise UsageError("--num_proc > 1 needs a spaCy pipeline loaded from disk (a package or a folder)")
    with contextlib.ExitStack() as stack:
        workers = [
            stack.enter_context(HelperProcess(f"the spaCy parser process {number} of {num_proc}"))
            for number in range(1, num_proc + 1)
        ]
        for worker in workers:
            worker.send(_start_worker, str(nlp.path), batch_size, unused_components(nlp))
        for worker in workers:
            worker.receive()
        in_flight = deque()
        for index, batch in enumerate(batches):
            worker = workers[index % num_proc]
            worker.send(_find_in_worker, [clip.captions for clip in batch])
            in_flight.append((batch, worker))
            if len(in_flight) >= num_proc * TASKS_IN_FLIGHT_PER_WORKER:
                batch, worker = in_flight.popleft()
                yield batch, worker.receive()
        for batch, worker in in_flight:
            yield batch, worker.receive()


def blank_clips(
    clips: Iterable[Clip], nlp: "Language", *, seed: int = 2, num_proc: int = 1, batch_size: int | None = None
) -> Iterator[tuple[Clip, dict | None]]:
    """Each clip with its blanked record, or None when no caption has a noun chunk; input order.

    One `random.choice` is drawn per blanked clip, in input order, from `random.Random(seed)`
    (the same stream as the official `random.seed(seed)` and `random.choice`).
    """
    rng = random.Random(seed)
    clips = iter(clips)
    batches = iter(lambda: list(itertools.islice(clips, CLIPS_PER_TASK)), [])
    for batch, candidates in _candidates_per_batch(batches, nlp, num_proc, batch_size):
        for clip, candidate in zip(batch, candidates):
            yield clip, None if candidate is None else blank_record(clip, candidate, rng)


def _input_records(args: argparse.Namespace) -> tuple[Iterable[object], int | None]:
    """The input's records and, when known, their number: a JSON / JSON Lines file or a HF dataset.

    A record of a file that cannot be decoded comes as a `JsonRecordError` (see `read_json_values`).
    """
    path = Path(args.input)
    if path.is_file():
        return read_json_values(path), None
    if not path.is_dir() and (path.suffix in (".json", ".jsonl") or path.is_absolute() or args.input.startswith(".")):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), args.input)
    import datasets

    if path.is_dir():
        try:
            dataset = datasets.load_from_disk(str(path))
        except FileNotFoundError:
            raise
        # A damaged folder fails in many ways: a truncated .arrow, state.json or dataset_info.json
        # that is not what save_to_disk writes (ArrowInvalid is a ValueError).
        except (OSError, ValueError, TypeError, AttributeError, KeyError) as error:
            raise DataError(f"{path}: not a readable saved dataset ({type(error).__name__}: {error})") from error
        if isinstance(dataset, datasets.DatasetDict):
            if args.split not in dataset:
                raise DataError(f"{path}: no split {args.split!r} (splits: {list(dataset)}); pass --split")
            dataset = dataset[args.split]
        return dataset, len(dataset)
    from .loading import check_hub_dataset

    check_hub_dataset(args.input, flag="input")
    return datasets.load_dataset(args.input, split=args.split, streaming=True), None


def _read_clips(
    records: Iterable[object], args: argparse.Namespace, max_caption_chars: int, summary: Counter
) -> Iterator[Clip]:
    """The input's clips; a bad record is an error naming it, or with --skip_invalid, counted and skipped."""
    for index, record in enumerate(records):
        summary["clips read"] += 1
        try:
            if isinstance(record, JsonRecordError):
                raise ValueError(record.problem)
            yield clip_from_record(record, args.video_id_column, args.captions_column, max_caption_chars)
        except ValueError as error:
            message = f"{args.input}: record {index}: {error}"
            if not args.skip_invalid:
                raise DataError(message) from None
            logger.warning("Skipping invalid record: %s", message)
            summary["dropped: invalid record"] += 1
    if not summary["clips read"]:
        raise DataError(f"{args.input}: holds no records (an empty file?)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "input",
        help="VaTeX-format JSON (a list of {videoID, enCap}) or JSON Lines file, a dataset folder saved "
        "with `save_to_disk`, or a Hub dataset name (streamed).",
    )
    add_output_arguments(
        parser,
        "Blanked records: .json (a JSON array) or .jsonl (JSON Lines).",
        "Replace an --output_file that an earlier blank wrote.",
    )
    parser.add_argument("--seed", type=int, default=2, help="Seed of Python's `random` (the release used 2).")
    parser.add_argument(
        "--spacy_model",
        help="spaCy pipeline (default: $FIBERBENCH_SPACY_MODEL, else the release's, en_core_web_trf; if missing, an "
        "installed smaller one, with a warning).",
    )
    parser.add_argument("--num_proc", type=positive_int, default=1, help="Processes that parse (output is identical).")
    parser.add_argument(
        "--batch_size", type=positive_int, default=None, help="Texts per nlp.pipe batch (default: the pipeline's)."
    )
    parser.add_argument("--video_id_column", default="videoID", help="Field holding '{video_id}_{start}_{end}'.")
    parser.add_argument("--captions_column", default="enCap", help="Field holding the list of English captions.")
    parser.add_argument("--split", default="train", help="Split of a dataset input.")
    parser.add_argument("--skip_invalid", action="store_true", help="Skip (and count) bad records instead of failing.")


def _records_counting_drops(pairs: Iterable[tuple[Clip, dict | None]], summary: Counter) -> Iterator[dict]:
    """The blanked records of (clip, record or None) pairs, counting the dropped clips by reason."""
    for clip, record in pairs:
        if record is not None:
            yield record
        elif any(caption.strip() for caption in clip.captions):
            summary["dropped: no noun chunk in any caption"] += 1
        else:
            summary["dropped: no caption"] += 1


def _check_arguments(args: argparse.Namespace) -> Output:
    """Refuse, before any work, flag values that cannot work; the output, which `Output.open` checks."""
    if args.output_file.suffix not in OUTPUT_SUFFIXES:
        raise UsageError(
            f"--output_file {args.output_file}: name a .json file (a JSON array) or a .jsonl file (JSON Lines)"
        )
    return Output(args.output_file, command="fiberbench blank", flag="--output_file", overwrite=args.overwrite_output_file)


def run(args: argparse.Namespace) -> int:
    output = _check_arguments(args)
    with output.open([args.input if Path(args.input).exists() else None], **arguments_of(args)):
        records, total = _input_records(args)
        # Imported once the input is known to be there: the modeling package loads torch and transformers.
        with collector_held_off():
            from fiberbench.modeling.noun_phrases import load_spacy_pipeline

            nlp = load_spacy_pipeline(args.spacy_model)
        summary = Counter()
        clips = _read_clips(records, args, nlp.max_length, summary)
        pairs = blank_clips(clips, nlp, seed=args.seed, num_proc=args.num_proc, batch_size=args.batch_size)
        progress = tqdm(pairs, total=total, unit="clip", desc="Blanking")
        blanked = write_json_records(output.path, _records_counting_drops(progress, summary))
    logger.info("Wrote %s", args.output_file)
    logger.info("clips read: %d", summary.pop("clips read", 0))
    logger.info("blanked: %d", blanked)
    for reason, count in sorted(summary.items()):
        logger.info("%s: %d", reason, count)
    return 0
