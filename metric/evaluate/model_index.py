"""`--model_index README.md`: one system's scores as a model card's `model-index` metadata, which the Hub shows on the
model's page (huggingface_hub's `EvalResult`s of a `ModelCardData`): EM and F1 against all answers and against the label
alone, and Correct@1 and MAP of ranked candidates, in percent. An existing card keeps its text and other metadata."""

from pathlib import Path

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from fiberbench.errors import UsageError
from fiberbench.hub import is_hub_id
from fiberbench.outputs import read_record, write_text

# results.json's scores -> their names on the page; the metric type is the key less "_label_only" (the same metric).
METRICS = {"exact_match": "EM", "f1": "F1", "exact_match_label_only": "EM, label only",
           "f1_label_only": "F1, label only", "vqa_accuracy": "VQA accuracy", "correct_at_1": "Correct@1", "map": "MAP"}


def check_flag(card: Path | None, names: list[str], inputs: list[Path], output_dir: Path | None) -> None:
    """Refuse --model_index before any work unless it may be written: for one system (a card describes one model), a
    Markdown file that is no input of this run, not in its --output_dir and not a file another fiberbench run wrote."""
    if card is None:
        return
    if len(names) != 1:
        raise UsageError(f"--model_index: a model card describes one model; give one predictions file, not "
                         f"{len(names)}")
    problem = None
    if card.suffix.lower() != ".md":
        problem = "a model card is a Markdown file (README.md)"
    elif any(card.resolve() == path.resolve() or path.resolve() in card.resolve().parents for path in inputs):
        problem = "it is an input of this command"
    elif output_dir is not None and output_dir.resolve() in [card.resolve(), *card.resolve().parents]:
        problem = "it is in --output_dir, which this run writes"
    elif read_record(card, folder=False) or any(
            str(card.resolve().relative_to(folder)) in (read_record(folder, folder=True) or {}).get("files", [])
            for folder in card.resolve().parents):
        problem = "another fiberbench run wrote it"
    if problem:
        raise UsageError(f"--model_index {card}: {problem}; give a model card's README.md")


def eval_results(results: dict, name: str) -> list[EvalResult]:
    """The `EvalResult`s of system `name` in `results` (results.json of `fiberbench evaluate`)."""
    dataset, row = results["dataset"], results["systems"][name]
    scores = {**row, "correct_at_1": (row.get("correct_at_k") or {}).get("1")}
    # The Hub links a dataset by its id; the bundled sample and local folders have none.
    dataset_type = dataset["name"] if is_hub_id(dataset["name"]) and not Path(dataset["name"]).exists() else "fiber"
    dataset_name = "FIBER (SYNTHETIC sample)" if dataset["synthetic"] else "FIBER"
    return [
        EvalResult(task_type="video-text-to-text", task_name="Video fill-in-the-blanks", dataset_type=dataset_type,
                   dataset_name=dataset_name, dataset_config=dataset["config"], dataset_split=dataset["split"],
                   metric_type=key.removesuffix("_label_only"), metric_name=shown, metric_value=round(scores[key], 2))
        for key, shown in METRICS.items()
        if scores.get(key) is not None
    ]


def write(card_path: Path, results: dict) -> None:
    """Write (or update) the model card at `card_path` with the `model-index` of the one system of `results`."""
    (name,) = results["systems"]
    if card_path.exists():
        card = ModelCard.load(card_path)
        card.data.model_name, card.data.eval_results = name, eval_results(results, name)
    else:
        data = ModelCardData(model_name=name, eval_results=eval_results(results, name))
        card = ModelCard(f"---\n{data.to_yaml()}\n---\n\n# {name}\n\nFIBER scores written by `fiberbench evaluate`.\n")
    write_text(card_path, str(card))
