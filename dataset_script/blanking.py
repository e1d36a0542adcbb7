"""`fiberbench blank`: blank one noun chunk per clip of captioning data, as the FIBER release was made.

The official procedure (paper §3.1): tidy each caption, take a clip's FIRST caption in which spaCy finds a noun
chunk, pick one of its noun chunks with one `random.choice` (Python's `random` seeded with 2, clips in input order)
and replace exactly that character span by `_____`; clips with no noun chunk are dropped. The same input, pipeline
and seed give the release's records, whatever the processes that parse (`--num_proc`: `nlp.pipe(n_process=...)`).
"""

import argparse
import logging
import random
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import datasets
from tqdm.auto import tqdm

from fiberbench.cli import add_output_arguments, arguments_of, positive_int
from fiberbench.errors import DataError, UsageError
from fiberbench.json_records import JsonRecordError, read_json_values, write_json_records
from fiberbench.modeling.noun_phrases import load_spacy_pipeline, unused_components
from fiberbench.outputs import check_output, finish_output, output_lock, start_output
from fiberbench.records import BLANK, ClipKey, check_plain_video_id, whole_seconds

logger = logging.getLogger(__name__)

COMMAND = "fiberbench blank"
# A clip's first caption with noun chunks: the tidied caption and the chunks' character spans.
Candidate = tuple[str, list[tuple[int, int]]]


def tidy_caption(caption: str) -> str:
    """Strip, upper-case the first character and end with a period, as the release did."""
    caption = caption.strip()
    caption = caption[0].upper() + caption[1:]
    return caption if caption.endswith(".") else caption + "."


def parse_clip_id(clip_id: str) -> ClipKey:
    """Split a VaTeX `videoID` "{video_id}_{start:06d}_{end:06d}"; the video id may contain "_"."""
    parts = clip_id.rsplit("_", maxsplit=2) if isinstance(clip_id, str) else []
    if len(parts) != 3 or not (parts[0] and parts[1].isdigit() and parts[2].isdigit()):
        raise ValueError(f"expected '{{video_id}}_{{start}}_{{end}}' with integer times, got {clip_id!r}")
    start, end = whole_seconds(parts[1], text=True), whole_seconds(parts[2], text=True)
    if start >= end:
        raise ValueError(f"the clip {clip_id!r} ends at {end} s, not after its start at {start} s")
    return check_plain_video_id(parts[0]), start, end


def clip_from_record(record, video_id_column: str, captions_column: str, max_chars: int) -> tuple[ClipKey, list[str]]:
    """A clip's key and captions from an input record; a ValueError names the bad field."""
    if isinstance(record, JsonRecordError):
        raise ValueError(record.problem)
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, got {type(record).__name__}")
    if missing := [column for column in (video_id_column, captions_column) if column not in record]:
        raise ValueError(f"field {missing[0]!r} is missing (fields: {sorted(record)})")
    captions = record[captions_column]
    if not isinstance(captions, list | tuple) or not all(isinstance(caption, str) for caption in captions):
        raise ValueError(f"field {captions_column!r} must be a list of strings, got {captions!r}")
    try:
        key = parse_clip_id(record[video_id_column])
    except ValueError as error:
        raise ValueError(f"field {video_id_column!r}: {error}") from None
    if long := [(position, len(caption)) for position, caption in enumerate(captions) if len(caption) > max_chars]:
        problem = f"caption {long[0][0]} has {long[0][1]:,} characters, more than the spaCy pipeline takes"
        raise ValueError(f"field {captions_column!r}: {problem} ({max_chars:,})")
    return key, list(captions)


def first_captions_with_noun_chunks(caption_lists: list[list[str]], nlp, num_proc: int = 1,
                                    batch_size: int | None = None) -> list[Candidate | None]:
    """For each clip, its first tidied caption with a noun chunk and the chunks' spans (None when it has none).
    
    In rounds (the next caption only of the clips still without a chunk): the result of parsing every caption, with a
    tenth of the work on VaTeX. Blank captions are skipped (the official script failed on them)."""
    found: list[Candidate | None] = [None] * len(caption_lists)
    tidied = ([tidy_caption(caption) for caption in captions if caption.strip()] for captions in caption_lists)
    pending = [(index, captions) for index, captions in enumerate(tidied) if captions]
    while pending:
        texts = (captions[0] for _, captions in pending)
        docs = nlp.pipe(texts, batch_size=batch_size, disable=unused_components(nlp), n_process=num_proc)
        still_pending = []
        for (index, captions), doc in zip(pending, tqdm(docs, total=len(pending), unit="caption", disable=None)):
            spans = [(chunk.start_char, chunk.end_char) for chunk in doc.noun_chunks]
            if spans:
                found[index] = (doc.text, spans)
            elif len(captions) > 1:
                still_pending.append((index, captions[1:]))
        pending = still_pending
    return found


def blank_record(key: ClipKey, candidate: Candidate, rng: random.Random) -> dict:
    """The record of clip `key`, one noun chunk of `candidate` blanked, chosen by one `rng.choice`: clips in input
    order, `random.Random(seed)` gives the same stream as the official `random.seed(seed)` and `random.choice`."""
    caption, spans = candidate
    start, end = rng.choice(spans)
    return {"video_id": key[0], "video_start_time": key[1], "video_end_time": key[2], "caption": caption,
            "masked_caption": caption[:start] + BLANK + caption[end:], "label": caption[start:end]}


def _input_records(args: argparse.Namespace) -> Iterable[object]:
    """The records of a JSON / JSON Lines file, a folder saved with `save_to_disk`, or a Hub dataset (streamed)."""
    path = Path(args.input)
    if path.is_file():
        return read_json_values(path)
    if path.is_dir():
        try:
            dataset = datasets.load_from_disk(str(path))
        except (OSError, ValueError, TypeError, AttributeError, KeyError) as error:  # a damaged folder: many ways
            raise DataError(f"{path}: not a readable saved dataset ({type(error).__name__}: {error})") from error
        if isinstance(dataset, datasets.DatasetDict) and args.split not in dataset:
            raise DataError(f"{path}: no split {args.split!r} (splits: {list(dataset)}); pass --split")
        return dataset[args.split] if isinstance(dataset, datasets.DatasetDict) else dataset
    if path.suffix in (".json", ".jsonl") or path.is_absolute() or args.input.startswith("."):
        raise FileNotFoundError(2, "No such file or directory", args.input)
    return datasets.load_dataset(args.input, split=args.split, streaming=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", help="VaTeX-format JSON (a list of {videoID, enCap}) or JSON Lines file, a dataset "
                        "folder saved with `save_to_disk`, or a Hub dataset name (streamed).")
    add_output_arguments(parser, "Blanked records: .json (a JSON array) or .jsonl (JSON Lines).",
                         "Replace what blank wrote there.")
    parser.add_argument("--seed", type=int, default=2, help="Seed of Python's `random` (the release used 2).")
    parser.add_argument("--spacy_model", help="spaCy pipeline (default: $FIBERBENCH_SPACY_MODEL, else the release's, "
                        "en_core_web_trf; if missing, an installed smaller one, with a warning).")
    parser.add_argument("--num_proc", type=positive_int, default=1, help="Processes that parse (the same output).")
    parser.add_argument("--batch_size", type=positive_int, help="Texts per nlp.pipe batch (default: the pipeline's).")
    parser.add_argument("--video_id_column", default="videoID", help="Field holding '{video_id}_{start}_{end}'.")
    parser.add_argument("--captions_column", default="enCap", help="Field holding the list of English captions.")
    parser.add_argument("--split", default="train", help="Split of a dataset input.")
    parser.add_argument("--skip_invalid", action="store_true", help="Skip (and count) bad records instead of failing.")


def run(args: argparse.Namespace) -> int:
    if args.output_file.suffix not in (".json", ".jsonl"):
        raise UsageError(f"--output_file {args.output_file}: name a .json file (a JSON array) or a .jsonl file "
                         "(JSON Lines)")
    with output_lock(args.output_file, "--output_file"):
        check_output(args.output_file, command=COMMAND, flag="--output_file", overwrite=args.overwrite_output_file,
                     inputs=[args.input] if Path(args.input).exists() else [])
        records = _input_records(args)
        nlp = load_spacy_pipeline(args.spacy_model)
        counts, clips, seen = Counter(), [], {}
        for index, record in enumerate(records):
            counts["clips read"] += 1
            try:
                clip = clip_from_record(record, args.video_id_column, args.captions_column, nlp.max_length)
                if seen.setdefault(clip[0], index) != index:
                    raise ValueError(f"the clip {clip[0]} is also record {seen[clip[0]]}")
                clips.append(clip)
            except ValueError as error:
                message = f"{args.input}: record {index}: {error}"
                if not args.skip_invalid:
                    raise DataError(message) from None
                logger.warning("Skipping invalid record: %s", message)
                counts["dropped: invalid record"] += 1
        if not counts["clips read"]:
            raise DataError(f"{args.input}: holds no records (an empty file?)")
        candidates = first_captions_with_noun_chunks([captions for _, captions in clips], nlp, args.num_proc,
                                                     args.batch_size)
        rng, blanked = random.Random(args.seed), []
        for (key, captions), candidate in zip(clips, candidates):
            if candidate is not None:
                blanked.append(blank_record(key, candidate, rng))
            elif any(caption.strip() for caption in captions):
                counts["dropped: no noun chunk in any caption"] += 1
            else:
                counts["dropped: no caption"] += 1
        # The previous output stays whole until the new one replaces it (atomically).
        record = start_output(args.output_file, COMMAND, None, folder=False, arguments=arguments_of(args))
        write_json_records(args.output_file, blanked)
        finish_output(args.output_file, record)
    logger.info("Wrote %s", args.output_file)
    logger.info("clips read: %d", counts.pop("clips read"))
    logger.info("blanked: %d", len(blanked))
    for reason, count in sorted(counts.items()):
        logger.info("%s: %d", reason, count)
    return 0
