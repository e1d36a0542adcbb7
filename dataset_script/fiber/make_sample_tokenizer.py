"""Train the small T5-style tokenizer shipped in modeling/tokenizer/ on the bundled sample's text.

Tiny FIBER models need T5's special tokens and no download: run `python -m fiberbench.data.fiber.make_sample_tokenizer`
after the sample changes (the same sample gives the same tokenizer). Its pieces are the sample's words, not those of
`tokenizers`' unigram trainer: on so small a corpus it keeps about 190 near-characters, and an answer then needs more
tokens than the paper's limit of 10.
"""

import argparse
import json
import math
import re
import string
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from transformers import T5TokenizerFast

from fiberbench.modeling import SAMPLE_TOKENIZER_PATH
from fiberbench.outputs import atomic_folder

from .release import SAMPLE_DIR, SPLIT_FILES


def sample_texts(sample_dir: Path) -> Iterator[str]:
    """Every caption and answer of the sample's splits (the blank itself is never tokenized)."""
    for name in SPLIT_FILES.values():
        for record in json.loads((sample_dir / name).read_text(encoding="utf-8")):
            yield record["caption"]
            yield record["label"]
            for answers in record["additional_answers"]:
                yield from answers


def word_pieces(text: str) -> Iterator[str]:
    """The pieces a word-level vocabulary needs for `text`: "▁word" per word, punctuation alone."""
    for chunk in text.split():
        for i, piece in enumerate(re.findall(r"\w+|[^\w\s]", chunk)):
            yield "\u2581" + piece if i == 0 else piece


def train_tokenizer(texts: Iterable[str]) -> T5TokenizerFast:
    """A T5 tokenizer (unigram, T5's special tokens, 100 sentinels) whose pieces are the words of `texts`.

    Each piece scores its log frequency; every character seen, and every printable ASCII one, is
    kept with a lower score, so text with new words is spelled out rather than turned into `<unk>`.
    """
    texts = list(texts)
    counts = Counter(piece for text in texts for piece in word_pieces(text))
    total = sum(counts.values())
    by_frequency = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    pieces = [(piece, math.log(count / total)) for piece, count in by_frequency]
    fallback_score = min(score for _, score in pieces) - 10.0
    seen = {character for text in texts for character in text if not character.isspace()}
    characters = sorted((seen | set(string.ascii_letters + string.digits + string.punctuation)) - set(counts))
    # T5's layout: <pad> 0, </s> 1, <unk> 2, the pieces, then the sentinels with <extra_id_0> last.
    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("\u2581", fallback_score)]
    vocab += pieces + [(character, fallback_score) for character in characters]
    vocab += [(f"<extra_id_{i}>", 0.0) for i in reversed(range(100))]
    return T5TokenizerFast(vocab=vocab)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample_dir", type=Path, default=SAMPLE_DIR, help="folder with train/val/test.json")
    parser.add_argument("--output_dir", type=Path, default=SAMPLE_TOKENIZER_PATH)
    args = parser.parse_args(argv)
    texts = list(sample_texts(args.sample_dir))
    tokenizer = train_tokenizer(texts)
    with atomic_folder(args.output_dir) as staging:
        tokenizer.save_pretrained(staging)
    print(f"Saved a {len(tokenizer)}-token tokenizer trained on {len(texts)} texts to {args.output_dir}")


if __name__ == "__main__":
    main()
