"""`fiberbench evaluate` gives, to the last bit, the scores it gave before its scoring was made faster.

golden_scores.json holds the numbers of results.json (every system's and baseline's scores, intervals
and categories, coverage and rank intervals, every comparison) that the straightforward per-blank code wrote for the
blanks and
predictions `make_inputs` makes: crowd-like answers with articles, case, punctuation, repeats,
empty and non-ASCII answers, annotators of one to three answers, 8 categories, ranked candidates
with repeats. Regenerate it only on purpose: `python tests/scoring/test_scores_unchanged.py`
writes it from the code checked out.
"""

import json
import random
import sys
from pathlib import Path

import pytest

from fiberbench.cli import main
from fiberbench.data import SAMPLE_DIR

GOLDEN = Path(__file__).with_name("golden_scores.json")
NUM_BLANKS, NUM_SYSTEMS, SEED = 400, 4, 7
FLAGS = ["--with_baselines", "--num_bootstrap", "300", "--seed", "5", "--confidence_level", "0.9"]
WORDS = "man woman boy dog cat ball guitar kitchen room street cliff water rope hat stage crowd café".split()
CATEGORIES = ("Person", "Passive entity", "Location", "Pronoun", "Body part", "Event", "Audio", "Other")
# Answers that normalize to the same text as others, to nothing, or only after Unicode's NFKC form.
ODD_ANSWERS = ("The!", "a-team", "DOG", "Dog!", "the  dog", "\uff44\uff4f\uff47", "ca\u0301fe", "man\u200b")


def crowd_answer(rng: random.Random) -> str:
    if rng.random() < 0.1:
        return rng.choice(ODD_ANSWERS)
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
    return rng.choice(("", "a ", "the ", "A ", "The ")) + words + rng.choice(("", "", ".", "!"))


def make_inputs(folder: Path) -> tuple[Path, list[Path]]:
    """A built dataset (the sample's train and validation, a test split of `NUM_BLANKS` blanks) and the predictions
    files of `NUM_SYSTEMS` systems of different skill, with 0 to 4 ranked candidates."""
    rng = random.Random(SEED)
    release = folder / "release"
    release.mkdir()
    for name in ("train", "val"):
        (release / f"{name}.json").write_text((SAMPLE_DIR / f"{name}.json").read_text())
    test = []
    for index in range(NUM_BLANKS):
        annotators = [[crowd_answer(rng) for _ in range(rng.choice((1, 1, 2, 3)))] for _ in range(rng.randint(1, 9))]
        test.append(
            {
                "video_id": f"clip{index:07d}",
                "video_start_time": 10,
                "video_end_time": 20,
                "masked_caption": "A man shows _____ to the camera.",
                "label": rng.choice(("", "a ", "The ")) + rng.choice(WORDS),  # a label must keep a word
                "additional_answers": annotators,
            }
        )
    (release / "test.json").write_text(json.dumps(test))
    categories = [f"{blank['video_id']}\t{rng.choice(CATEGORIES)}" for blank in test]
    (release / "categories_test.tsv").write_text("\n".join(["video_id\tcategory", *categories]) + "\n")
    assert main(["build-dataset", "--data_dir", str(release), "--output_dir", str(folder / "fiber")]) == 0
    files = []
    for system in range(NUM_SYSTEMS):
        rows = []
        for blank in test:
            answers = [blank["label"], *(answer for annotator in blank["additional_answers"] for answer in annotator)]
            prediction = rng.choice(answers) if rng.random() < 0.2 + 0.15 * system else crowd_answer(rng)
            prediction = "" if rng.random() < 0.02 else prediction  # an empty answer is a valid, wrong one
            candidates = [prediction, *(rng.choice((rng.choice(answers), crowd_answer(rng))) for _ in range(3))]
            keys = {field: blank[field] for field in ("video_id", "video_start_time", "video_end_time")}
            rows.append({**keys, "prediction": prediction, "candidates": candidates[: rng.randint(1, 4)]})
        files.append(folder / f"system_{system}.jsonl")
        files[-1].write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder / "fiber", files


def scores_of(folder: Path) -> dict:
    """The scores in results.json of `fiberbench evaluate` on `make_inputs`: systems, baselines, comparisons."""
    dataset, files = make_inputs(folder)
    output_dir = folder / "out"
    arguments = ["evaluate", *map(str, files), "--dataset_name", str(dataset), "--output_dir", str(output_dir)]
    assert main([*arguments, *FLAGS]) == 0
    results = json.loads((output_dir / "results.json").read_text())
    for row in results["systems"].values():
        del row["file"]  # a path in the temporary folder
        del row["reading"]  # how the replies were read (none here): a record, not a score
    return {part: results[part] for part in ("systems", "baselines", "comparisons")}


def test_scores_equal_those_of_the_straightforward_code(tmp_path):
    scores, golden = scores_of(tmp_path), json.loads(GOLDEN.read_text())
    # The p-values sum a binomial tail (McNemar) or squares (the sign-flip test) in numpy, whose float sums round
    # differently in numpy 1.26 (the lower bounds) than in 2.x, where the golden file was written: equal to the last
    # few bits, not to every bit.
    for ours, theirs in zip(scores["comparisons"], golden["comparisons"], strict=True):
        for key in ("p_value", "p_value_holm"):
            assert ours.pop(key) == pytest.approx(theirs.pop(key), rel=1e-12, abs=0)
    assert scores == golden


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as temporary:
        GOLDEN.write_text(json.dumps(scores_of(Path(temporary)), indent=1, ensure_ascii=False) + "\n")
    sys.exit(0)
