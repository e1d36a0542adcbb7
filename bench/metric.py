"""Benchmark of the FIBER metric: examples/s through `evaluate.load(...).compute`, the plain `score_predictions` and a
straightforward per-example scorer, each run cold (the metric's cache of normalized answers emptied first)."""

import argparse
import random
import time

import evaluate

from fiberbench.metric import METRIC_PATH, normalize_answer, score_predictions
from fiberbench.metric.fiber_metric.scores import _normalized

import quick

WORDS = (
    "man woman boy girl child dog cat ball guitar piano drum kitchen room house street mountain cliff "
    "river water balloon rope car bike hat shirt table chair stage crowd camera phone knife bowl cake "
    "young old little red blue green small large wooden metal his her their people audience friend"
).split()
DECORATIONS = ("", "a ", "the ", "an ", "The ", "A ")
ENDINGS = ("", ".", "!", "'s", " ")


def random_answer(rng: random.Random) -> str:
    """A one-to-three-word noun phrase with the articles, case and punctuation crowd answers have."""
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
    return rng.choice(DECORATIONS) + (words.title() if rng.random() < 0.1 else words) + rng.choice(ENDINGS)


def make_examples(num_examples: int, num_answers: int, seed: int) -> tuple[list[str], list[list[str]]]:
    """Predictions and references; about half of the predictions are one of their answers."""
    rng = random.Random(seed)
    references = [[random_answer(rng) for _ in range(num_answers)] for _ in range(num_examples)]
    predictions = [rng.choice(answers) if rng.random() < 0.5 else random_answer(rng) for answers in references]
    return predictions, references


def straightforward_scores(predictions: list[str], references: list[list[str]]) -> dict[str, float]:
    """The same definition scored one example at a time, normalizing both sides of every comparison."""
    exact_matches, f1s, release_f1s = [], [], []
    for prediction, answers in zip(predictions, references):
        exact_matches.append(max(int(normalize_answer(prediction) == normalize_answer(a)) for a in answers))
        f1s.append(max(token_set_f1(normalize_answer(prediction), normalize_answer(a)) for a in answers))
        release_f1s.append(max(token_set_f1(prediction, a) for a in answers))  # the release's model F1: raw text
    return {"exact_match": 100 * sum(exact_matches) / len(exact_matches), "f1": 100 * sum(f1s) / len(f1s),
            "f1_release": 100 * sum(release_f1s) / len(release_f1s)}


def token_set_f1(normalized: str, other_normalized: str) -> float:
    tokens, other_tokens = set(normalized.split()), set(other_normalized.split())
    if not tokens and not other_tokens:
        return 1.0
    true_positives = len(tokens & other_tokens)
    return true_positives / (true_positives + (len(tokens - other_tokens) + len(other_tokens - tokens)) / 2)


def best_seconds(function, repeats: int) -> tuple[float, dict]:
    """The fastest of `repeats` runs (the least disturbed by the machine) and the last result."""
    times = []
    for _ in range(repeats):
        _normalized.cache_clear()  # cold: a first scoring normalizes every answer
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--num_examples", type=int, default=1000)
    parser.add_argument("--num_answers", type=int, default=13)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = quick.parse_args(parser, num_examples=100, repeats=1)

    predictions, references = make_examples(args.num_examples, args.num_answers, args.seed)
    metric = evaluate.load(str(METRIC_PATH))
    runs = {
        "(a) evaluate.load(...).compute": lambda: metric.compute(predictions=predictions, references=references),
        "(b) plain score_predictions": lambda: score_predictions(predictions, references),
        "(c) straightforward per example": lambda: straightforward_scores(predictions, references),
    }
    seconds, results = {}, {}
    for name, function in runs.items():
        seconds[name], result = best_seconds(function, args.repeats)
        results[name] = {key: round(value, 10) for key, value in result.items()}
    if len({str(result) for result in results.values()}) != 1:
        raise SystemExit(f"the ways of scoring disagree: {results}")

    scores = {key: round(value, 2) for key, value in results["(b) plain score_predictions"].items()}
    print(f"{args.num_examples} examples x {args.num_answers} answers, best of {args.repeats} runs; scores {scores}")
    print("| method | seconds | examples/s | speed vs (c) |\n|---|---|---|---|")
    c = seconds["(c) straightforward per example"]
    for name, value in seconds.items():
        print(f"| {name} | {value:.4f} | {args.num_examples / value:,.0f} | {c / value:.2f}x |")
    a, b = seconds["(a) evaluate.load(...).compute"], seconds["(b) plain score_predictions"]
    print(f"(b) is {c / b:.2f}x as fast as (c) ({quick.verdict(args, 'target: at least 1x')})")
    print(f"(a) takes {a / b:.2f}x the time of (b) ({quick.verdict(args, 'target: at most 2x')})")


if __name__ == "__main__":
    main()
