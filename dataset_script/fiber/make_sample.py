"""Make the bundled SYNTHETIC sample of FIBER: release-format JSON, category TSVs and I3D-like features.

The blank can be recovered from the features but not from the text: every clip shows one "item" (an object, a
person or a place) drawn independently of its category-neutral caption template ("The camera slowly pans to show
_____."), and its features carry the item (a signature of dimensions active in most frames, among random distractor
dimensions; sparse and quantized, so that the folder compresses to under 1 MB). `python -m
fiberbench.data.fiber.make_sample` rewrites `sample/`: the same seed gives byte-identical files.
"""

import argparse
import json
import random
import string
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fiberbench.errors import UsageError
from fiberbench.outputs import atomic_folder
from fiberbench.records import BLANK, VIDEO_FEATURE_SIZE, clip_key, feature_file_name

from .release import SAMPLE_DIR

SEED = 2022
# Keyed by the release's file stems. Enough clips for a tiny model to learn the items in minutes
# on a CPU, few enough for the whole folder to stay under 1 MB compressed.
CLIPS_PER_SPLIT = {"train": 400, "val": 60, "test": 60}
# Frames per clip, uniform; real I3D clips have about 32 (one feature per 8 frames at 25 fps).
FRAME_RANGE = (16, 40)
# Each item owns SIGNATURE_SIZE dimensions, set in a SIGNATURE_FRAME_RATE share of the frames;
# DISTRACTORS_PER_FRAME random dimensions per frame are noise (they may hit other items' dims).
SIGNATURE_SIZE = 8
SIGNATURE_FRAME_RATE = 0.7
DISTRACTORS_PER_FRAME = 3
# Few distinct values and mostly zeros: the .npy files compress about 100-fold in git.
FEATURE_VALUES = np.array([0.5, 1.0, 1.5, 2.0], dtype=np.float32)
VIDEO_ID_ALPHABET = string.ascii_letters + string.digits + "_-"
CLIP_SECONDS = 10

SAMPLE_TITLE = "# FIBER bundled sample: SYNTHETIC data"
SAMPLE_README = SAMPLE_TITLE + """

Everything in this folder is SYNTHETIC. It is not FIBER, not VaTeX and not I3D: no video, caption or
answer here comes from a person. It exists so that the package can be built, tested and demonstrated
offline in seconds.

- Format: exactly the release's: `train.json` ({train} clips), `val.json` ({val}), `test.json` ({test}),
  `categories_val.tsv` and `categories_test.tsv` (`video_id`, `category`, with a header row), and one
  `i3d/{{video_id}}_{{start:06d}}_{{end:06d}}.npy` per clip, float32 of shape (1, T, 1024), T varying.
- Design: each clip shows one of 15 items (5 objects, 5 people, 5 places) drawn uniformly and
  independently of a category-neutral caption template, so the text alone does not tell the item;
  the features carry it (a per-item signature of dimensions active in most frames, plus random
  distractor dimensions). A model that uses the features can beat a text-only model by far.
- Made by `make_sample.py` (seed {seed}); rerun it to get byte-identical files.
"""


@dataclass(frozen=True)
class Item:
    """What a synthetic clip shows: its answers (most natural first) and its Table 4 category."""

    answers: tuple[str, ...]
    category: str


# Each Table 4 category's items, each item's answers most natural first. Some answer words are shared across items
# ("a person", "a room", "an instrument") so that F1 gives partial credit, as it does on the real data.
ANSWERS_BY_CATEGORY = {
    "Passive entity": (("a guitar", "an acoustic guitar", "a musical instrument", "an instrument"),
                       ("a bicycle", "a bike", "a vehicle"),
                       ("a laptop", "a computer", "a laptop computer"), ("a pizza", "some food", "a pizza pie"),
                       ("a kite", "a flying toy", "a toy")),
    "Person": (("a chef", "a cook", "a person"), ("a firefighter", "a fireman", "a person"),
               ("a ballerina", "a dancer", "a young woman"), ("a doctor", "a physician", "a person"),
               ("a police officer", "a policeman", "a cop", "a person")),
    "Location": (("a beach", "the seaside", "the shore"), ("a kitchen", "a room", "a cooking area"),
                 ("a gym", "a fitness room", "a room"), ("a park", "a public park", "a green area"),
                 ("a stage", "a concert stage", "a platform")),
}
ITEMS = tuple(Item(answers, category) for category, items in ANSWERS_BY_CATEGORY.items() for answers in items)

SUBJECTS = ("A man", "A woman", "A young girl", "A boy", "Someone", "An old man", "A teenager")

# Category-neutral: any item fits any template. `{subject}` varies; the blank may open the caption.
TEMPLATES = (
    "{subject} is looking at _____ for a while.", "The camera slowly pans to show _____.",
    "_____ can be seen clearly in this video.", "{subject} points at _____ and smiles.",
    "{subject} talks about _____ in front of the camera.", "{subject} records _____ with a phone.",
    "_____ appears on the screen for a few seconds.", "{subject} walks toward _____ slowly.",
    "There is _____ in the video while {subject_lower} speaks.", "{subject} describes _____ to the viewers.",
)


def make_annotations(rng: random.Random, item: Item) -> list[list[str]]:
    """3 to 5 annotators, each giving 1 to 3 of the item's answers, the most natural ones likelier first."""
    weights = [1.0 / (rank + 1) for rank in range(len(item.answers))]
    annotations = []
    for _ in range(rng.randint(3, 5)):
        remaining, remaining_weights, answers = list(item.answers), list(weights), []
        for _ in range(rng.randint(1, min(3, len(item.answers)))):
            choice = rng.choices(range(len(remaining)), weights=remaining_weights)[0]
            answers.append(remaining.pop(choice))
            remaining_weights.pop(choice)
        annotations.append(answers)
    return annotations


def make_features(rng: np.random.Generator, item_index: int, num_frames: int) -> np.ndarray:
    """(1, T, 1024) float32: the item's signature dims in ~70% of frames, plus random distractor dims."""
    features = np.zeros((num_frames, VIDEO_FEATURE_SIZE), dtype=np.float32)
    signature = np.arange(item_index * SIGNATURE_SIZE, (item_index + 1) * SIGNATURE_SIZE)
    active_frames = np.flatnonzero(rng.random(num_frames) < SIGNATURE_FRAME_RATE)
    features[np.ix_(active_frames, signature)] = rng.choice(FEATURE_VALUES, (len(active_frames), SIGNATURE_SIZE))
    distractors = rng.integers(0, VIDEO_FEATURE_SIZE, (num_frames, DISTRACTORS_PER_FRAME))
    features[np.arange(num_frames)[:, None], distractors] = rng.choice(FEATURE_VALUES, distractors.shape)
    return features[None]


def make_record(rng: random.Random, video_id: str, item: Item, annotated: bool) -> dict:
    """One release-format record showing `item`, in a random template (with annotators if `annotated`)."""
    answer, start, template, subject = item.answers[0], rng.randrange(300), rng.choice(TEMPLATES), rng.choice(SUBJECTS)
    masked_caption = template.format(subject=subject, subject_lower=subject.lower())
    label = answer[0].upper() + answer[1:] if masked_caption.startswith(BLANK) else answer  # as the release did
    return {"video_id": video_id, "video_start_time": start, "video_end_time": start + CLIP_SECONDS,
            "caption": masked_caption.replace(BLANK, label), "masked_caption": masked_caption, "label": label,
            "additional_answers": make_annotations(rng, item) if annotated else []}


def write_split(folder: Path, split: str, num_clips: int, rngs: tuple, frame_range: tuple, video_ids: set) -> None:
    """Write `{split}.json`, its clips' features and (except train) `categories_{split}.tsv`."""
    text_rng, feature_rng = rngs
    records, category_lines = [], ["video_id\tcategory"]
    while len(records) < num_clips:
        video_id = "".join(text_rng.choice(VIDEO_ID_ALPHABET) for _ in range(11))  # YouTube's ids' length
        if video_id in video_ids:
            continue
        video_ids.add(video_id)
        item_index = text_rng.randrange(len(ITEMS))
        records.append(make_record(text_rng, video_id, ITEMS[item_index], annotated=split != "train"))
        category_lines.append(f"{video_id}\t{ITEMS[item_index].category}")
        features = make_features(feature_rng, item_index, int(feature_rng.integers(frame_range[0], frame_range[1] + 1)))
        np.save(folder / "i3d" / feature_file_name(*clip_key(records[-1])), features)
    (folder / f"{split}.json").write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    if split != "train":
        (folder / f"categories_{split}.tsv").write_text("\n".join(category_lines) + "\n", encoding="utf-8")


def make_sample(output_dir: Path, clips_per_split: dict = CLIPS_PER_SPLIT, frame_range=FRAME_RANGE, seed=SEED) -> None:
    """Write the sample into `output_dir`, replacing it whole and atomically, and only when it holds a sample."""
    output_dir = Path(output_dir)
    readme = output_dir / "README.md"
    if output_dir.exists() and not (readme.is_file() and readme.read_text(encoding="utf-8").startswith(SAMPLE_TITLE)):
        raise UsageError(f"{output_dir} exists and is not a sample written by make_sample.py: not replacing it")
    rngs, video_ids = (random.Random(seed), np.random.default_rng(seed)), set()
    with atomic_folder(output_dir) as staging:
        (staging / "i3d").mkdir()
        for split, num_clips in clips_per_split.items():
            write_split(staging, split, num_clips, rngs, frame_range, video_ids)
        (staging / "README.md").write_text(SAMPLE_README.format(seed=seed, **clips_per_split), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output_dir", type=Path, default=SAMPLE_DIR, help="Where to write the sample.")
    parser.add_argument("--seed", type=int, default=SEED, help="Random seed (the bundled sample uses the default).")
    args = parser.parse_args()
    make_sample(args.output_dir, seed=args.seed)


if __name__ == "__main__":
    main()
