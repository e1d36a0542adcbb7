"""A model card's `model-index` metadata from `fiberbench evaluate`'s results: the Hub shows a model's FIBER scores.

The Hub reads evaluation results from the YAML header of a model's README.md, in the
`model-index` format (task, dataset, metrics with their values), which huggingface_hub writes and
parses as `EvalResult`s of a `ModelCardData`. `fiberbench evaluate --model_index README.md` writes
one for the one system it scores: EM and F1 against all answers and against the label alone, and
Correct@1 and MAP when the system gave ranked candidates, in percent as `results.json` has them.
An existing card keeps its text and its other metadata; only its `model-index` (and `model_name`)
is replaced.
"""

from pathlib import Path

from fiberbench.errors import UsageError

TASK_TYPE, TASK_NAME = "video-text-to-text", "Video fill-in-the-blanks"
# results.json's scores -> their names on the model's page. A score's metric type (as the Hub's metrics name them)
# is its own name less LABEL_ONLY: the label-only scores are the same metrics, against the label alone.
METRICS = {
    "exact_match": "EM",
    "f1": "F1",
    "exact_match_label_only": "EM, label only",
    "f1_label_only": "F1, label only",
    "correct_at_1": "Correct@1",
    "map": "MAP",
}
LABEL_ONLY = "_label_only"


def check_flag(card: Path | None, names: list[str]) -> None:
    """Refuse --model_index for several systems (a model card describes one model), before any work."""
    if card is not None and len(names) != 1:
        raise UsageError(f"--model_index: a model card describes one model; give one predictions file, not {len(names)}")


def eval_results(results: dict, name: str) -> list:
    """The `EvalResult`s of system `name` in `results` (results.json of `fiberbench evaluate`)."""
    from huggingface_hub import EvalResult

    from fiberbench.hub import is_hub_id

    dataset, row = results["dataset"], results["systems"][name]
    scores = {**row, "correct_at_1": (row.get("correct_at_k") or {}).get("1")}
    common = {
        "task_type": TASK_TYPE,
        "task_name": TASK_NAME,
        # The Hub links a dataset by its id; the bundled sample and local folders have none.
        "dataset_type": dataset["name"] if is_hub_id(dataset["name"]) and not Path(dataset["name"]).exists() else "fiber",
        "dataset_name": "FIBER (SYNTHETIC sample)" if dataset["synthetic"] else "FIBER",
        "dataset_config": dataset["config"],
        "dataset_split": dataset["split"],
    }
    return [
        EvalResult(
            metric_type=key.removesuffix(LABEL_ONLY), metric_name=shown, metric_value=round(scores[key], 2), **common
        )
        for key, shown in METRICS.items()
        if scores.get(key) is not None
    ]


def write(card_path: Path, results: dict) -> None:
    """Write (or update) the model card at `card_path` with the `model-index` of the one system of `results`."""
    from huggingface_hub import ModelCard, ModelCardData

    from fiberbench.files import write_text

    (name,) = results["systems"]
    if card_path.exists():
        card = ModelCard.load(card_path)
        card.data.model_name = name
        card.data.eval_results = eval_results(results, name)
    else:
        data = ModelCardData(model_name=name, eval_results=eval_results(results, name))
        card = ModelCard(f"---\n{data.to_yaml()}\n---\n\n# {name}\n\nFIBER scores written by `fiberbench evaluate`.\n")
    write_text(card_path, str(card))
