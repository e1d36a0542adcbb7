"""`fiberbench evaluate` on the bundled sample: the metric's scores to the last digit, baselines, the formats, results.md,
the chart and the model card's model-index."""

import csv
import json
import os
import re
import subprocess

import pytest

from huggingface_hub import ModelCard

from fiberbench.cli import main
from fiberbench.data import load_sample
from fiberbench.metric import human_agreement, references_from_example, score_predictions
from fiberbench.metric.baselines import most_frequent_answer
from fiberbench.metric.evaluate.report import BASELINE_STYLES, category_figure, plot_layout, system_colours
from fiberbench.outputs import FOLDER_RECORD, write_jsonl
from fiberbench.records import KEY_FIELDS

SETTINGS = {"confidence_level": 0.9, "num_bootstrap": 500, "seed": 3}
FLAGS = ["--confidence_level", "0.9", "--num_bootstrap", "500", "--seed", "3"]


@pytest.fixture(scope="module")
def sample():
    return load_sample("text")


@pytest.fixture(scope="module")
def test_split(sample):
    return sample["test"].to_list()


def prediction_rows(blanks, answer, candidates=None) -> list[dict]:
    """One row per blank: `answer(index, blank)`, and `candidates(index, blank)` when given."""
    return [{field: blank[field] for field in KEY_FIELDS} | {"prediction": answer(index, blank)}
            | ({"candidates": candidates(index, blank)} if candidates else {}) for index, blank in enumerate(blanks)]


def label_half_the_time(index, blank):
    return blank["label"] if index % 2 else "a thing"


SYSTEMS = {
    "half": (label_half_the_time, lambda index, blank: ["a thing", blank["label"], "a man"]),
    "annotator": (lambda index, blank: blank["additional_answers"][0][0], None),
    "partial": (lambda index, blank: f"{blank['label']} thing" if index % 3 else "", None),
}


@pytest.fixture(scope="module")
def predictions_dir(tmp_path_factory, test_split):
    folder = tmp_path_factory.mktemp("predictions")
    for name, (answer, candidates) in SYSTEMS.items():
        write_jsonl(folder / f"{name}.jsonl", prediction_rows(test_split, answer, candidates))
    return folder


@pytest.fixture(scope="module")
def evaluated(predictions_dir, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("evaluation") / "out"
    files = [str(predictions_dir / f"{name}.jsonl") for name in SYSTEMS]
    assert main(["evaluate", *files, "--with_baselines", "--output_dir", str(output_dir), *FLAGS]) == 0
    return output_dir, json.loads((output_dir / "results.json").read_text())


def test_scores_equal_the_evaluate_module_to_the_last_digit(evaluated, test_split, fiber_metric):
    _, results = evaluated
    references = [references_from_example(blank) for blank in test_split]
    categories = [blank["category"] for blank in test_split]
    for name, (answer, candidates) in SYSTEMS.items():
        rows = prediction_rows(test_split, answer, candidates)
        predictions, ranked = [row["prediction"] for row in rows], [row["candidates"] for row in rows] if candidates else None
        every = fiber_metric.compute(predictions=predictions, references=references, categories=categories,
                                     candidates=ranked, **SETTINGS)
        label = fiber_metric.compute(predictions=predictions, references=[blank["label"] for blank in test_split],
                                     **SETTINGS)
        system, intervals = results["systems"][name], results["systems"][name]["confidence_intervals"]
        keys = ("exact_match", "f1", "correct_at_k", "map")
        assert [system[key] for key in keys] == [every.get(key) for key in keys]
        assert [intervals.get(key) for key in keys] == [every.get(f"{key}_ci") for key in keys]
        assert [system["exact_match_label_only"], system["f1_label_only"], intervals["f1_label_only"]] == [
            label["exact_match"], label["f1"], label["f1_ci"]]
        assert {category: (scores["count"], scores["exact_match"], scores["f1"], scores["confidence_intervals"]["f1"])
                for category, scores in system["by_category"].items()} == {
            category: (count, every["exact_match_by_category"][category], every["f1_by_category"][category],
                       every["f1_ci_by_category"][category]) for category, count in every["count_by_category"].items()}
    assert results["systems"]["half"]["correct_at_k"] == {"1": 0.0, "2": 100.0}  # K up to the 3 candidates


def test_baselines_equal_the_most_frequent_answer_and_human_agreement(evaluated, sample, test_split, fiber_metric):
    _, results = evaluated
    answer = most_frequent_answer(sample["train"]["label"])
    baseline = results["baselines"]["most frequent answer"]
    assert baseline["answer"] == answer
    expected = fiber_metric.compute(predictions=[answer] * 60, references=[references_from_example(b) for b in test_split])
    assert (baseline["exact_match"], baseline["f1"]) == (expected["exact_match"], expected["f1"])
    labels, answers = ([blank[field] for blank in test_split] for field in ("label", "additional_answers"))
    agreement = human_agreement(labels, answers)
    human = results["baselines"]["human agreement"]
    assert human["exact_match"] == pytest.approx(agreement["first_answers_per_caption_exact_match"], rel=1e-12)
    assert human["f1"] == pytest.approx(agreement["first_answers_per_caption_f1"], rel=1e-12)
    assert human["num_blanks"] == agreement["num_captions"]


def test_results_layout_comparisons_and_leaderboard(evaluated, capsys):
    output_dir, results = evaluated
    dataset = {"name": "the bundled sample", "config": "text", "split": "test", "num_blanks": 60, "synthetic": True}
    assert results["dataset"] == dataset
    assert results["settings"] == SETTINGS
    pairs = {(tuple(comparison["systems"]), comparison["metric"]) for comparison in results["comparisons"]}
    assert len(pairs) == len(results["comparisons"]) == 3 * 3  # F1, EM and VQA accuracy
    for comparison in results["comparisons"]:
        a, b = comparison["systems"]
        metric = comparison["metric"]
        assert results["systems"][a]["f1"] >= results["systems"][b]["f1"]  # the better-ranked first
        assert comparison["difference"] == pytest.approx(results["systems"][a][metric] - results["systems"][b][metric])
        assert 0 < comparison["p_value"] <= comparison["p_value_holm"] <= 1
        assert comparison["test"] == ("McNemar's exact test" if metric == "exact_match" else
                                      "sign-flip test (normal approximation)")
    leaderboard = (output_dir / "results.md").read_text()
    assert "**SYNTHETIC data**" in leaderboard and "## Comparisons" in leaderboard
    assert "cannot be told from luck on these 60 blanks" in leaderboard
    rows = {cells[2]: cells[:2] for cells in table_rows(leaderboard) if len(cells) == 11}
    assert list(rows)[:2] == ["system", "---"] and rows["annotator"] == ["1", "1"]
    # The baselines are shown, never ranked.
    assert rows["human agreement (baseline)"] == ["–", "–"]
    assert [ranks for name, ranks in rows.items() if name.startswith('most frequent answer "')] == [["–", "–"]]
    assert {path.name for path in output_dir.iterdir()} == {"results.json", "results.md", "by_category.png", FOLDER_RECORD}
    assert json.loads((output_dir / FOLDER_RECORD).read_text())["written_by"] == "fiberbench evaluate"
    for path in output_dir.iterdir():
        assert path.stat().st_mode & 0o777 == 0o644


def test_train_py_predictions_are_accepted_other_splits_skipped(sample, test_split, tmp_path):
    # The rows train.py writes to predictions.jsonl: validation's and test's, with their own fields beside.
    records = [
        {"split": name, "index": index, **{field: row[field] for field in (*KEY_FIELDS, "masked_caption", "label")},
         "prediction": "a man", "candidates": ["a man", "a woman"], "exact_match": 0.0}
        for name in ("validation", "test") for index, row in enumerate(sample[name].to_list())
    ]
    write_jsonl(tmp_path / "predictions.jsonl", records)
    assert main(["evaluate", str(tmp_path / "predictions.jsonl"), "--output_dir", str(tmp_path / "out"), *FLAGS]) == 0
    system = json.loads((tmp_path / "out" / "results.json").read_text())["systems"]["predictions"]
    references = [references_from_example(blank) for blank in test_split]
    assert system["exact_match"] == score_predictions(["a man"] * 60, references)["exact_match"]
    assert system["correct_at_k"]["2"] >= system["correct_at_k"]["1"]


def test_csv_with_bom_and_windows_line_ends_and_a_json_array_score_as_json_lines(evaluated, test_split, tmp_path):
    rows = prediction_rows(test_split, *SYSTEMS["half"])
    with (tmp_path / "half.csv").open("w", newline="", encoding="utf-8-sig") as file:
        writer = csv.DictWriter(file, fieldnames=[*KEY_FIELDS, "prediction", "candidates"], lineterminator="\r\n")
        writer.writeheader()
        writer.writerows({**row, "candidates": json.dumps(row["candidates"])} for row in rows)
    (tmp_path / "half_array.json").write_text(json.dumps(rows))
    files = [tmp_path / "half.csv", tmp_path / "half_array.json"]
    assert main(["evaluate", *map(str, files), "--output_dir", str(tmp_path / "out"), *FLAGS]) == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    for name in ("half", "half_array"):
        system = results["systems"][name]
        expected = evaluated[1]["systems"]["half"]
        assert {key: system[key] for key in ("exact_match", "f1", "correct_at_k", "map", "confidence_intervals")} == {
            key: expected[key] for key in ("exact_match", "f1", "correct_at_k", "map", "confidence_intervals")
        }


def write_rows(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_an_empty_answer_is_a_valid_wrong_answer(test_split, tmp_path):
    path = write_rows(tmp_path / "empty.jsonl", prediction_rows(test_split, lambda index, blank: ""))
    assert main(["evaluate", str(path), "--output_dir", str(tmp_path / "out"), "--num_bootstrap", "10"]) == 0
    system = json.loads((tmp_path / "out" / "results.json").read_text())["systems"]["empty"]
    assert system["exact_match"] == system["f1"] == 0.0 and system["correct_at_k"] is None


def table_rows(markdown: str) -> list[list[str]]:
    """The cells of every table row of a Markdown text, split at the pipes that are not escaped."""
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in markdown.splitlines() if line[:1] == "|"]


def test_names_holding_markdown_stay_in_their_cells(test_split, tmp_path):
    files = [write_rows(tmp_path / f"{name}.jsonl", prediction_rows(test_split, label_half_the_time)) for name in "ab"]
    names = ["A | injected | $\\alpha^$ row", "B\n| 1 | fake | 100 |"]  # and a '$' is a dollar in the chart
    output_dir = tmp_path / "out"
    assert main(["evaluate", *map(str, files), "--names", *names, "--output_dir", str(output_dir), *FLAGS]) == 0
    leaderboard = (output_dir / "results.md").read_text()
    rows = table_rows(leaderboard)
    assert {len(cells) for cells in rows} == {11, 6}  # the leaderboard's 11 columns, the comparisons' 6
    assert len([cells for cells in rows if cells[0].isdigit()]) == 2
    assert "A \\| injected \\| $\\\\alpha^$ row" in leaderboard and "B \\| 1 \\| fake \\| 100 \\|" in leaderboard
    assert (output_dir / "by_category.png").stat().st_size > 0
    assert json.loads((output_dir / "results.json").read_text())["systems"].keys() == set(names)


def test_results_md_says_how_to_read_it_with_one_format_per_column(test_split, tmp_path):
    right = write_rows(tmp_path / "right.jsonl", prediction_rows(test_split, lambda index, blank: blank["label"]))
    wrong = write_rows(tmp_path / "wrong.jsonl", prediction_rows(test_split, label_half_the_time))
    output_dir = tmp_path / "out"
    assert main(["evaluate", str(right), str(wrong), "--output_dir", str(output_dir), *FLAGS]) == 0
    leaderboard = (output_dir / "results.md").read_text()
    assert "**How to read a confidence interval.**" in leaderboard and "**How to read a p-value.**" in leaderboard
    results = json.loads((output_dir / "results.json").read_text())
    assert all(comparison["p_value"] < 1e-6 for comparison in results["comparisons"])  # no floor
    comparisons = [cells for cells in table_rows(leaderboard) if len(cells) == 6 and cells[2] in ("F1", "EM")]
    assert [cells[4:] for cells in comparisons] == [["<0.0001", "<0.0001"]] * 2
    scores = [cells[3:10] for cells in table_rows(leaderboard) if len(cells) == 11 and cells[0].isdigit()]
    assert all(re.fullmatch(r"\d+\.\d \[\d+\.\d, \d+\.\d\]|–", cell) for row in scores for cell in row), scores
    assert all(re.fullmatch(r"[+-]\d+\.\d \[[+-]\d+\.\d, [+-]\d+\.\d\]", cells[3]) for cells in comparisons)


def bar_styles(figure) -> list[dict]:
    """Per panel, each legend name -> (face colour, hatch) of its bars."""
    from matplotlib.colors import to_hex

    return [{bars.get_label(): (to_hex(bars[0].get_facecolor()), bars[0].get_hatch()) for bars in ax.containers
             if bars.get_label() and not bars.get_label().startswith("_")} for ax in figure.axes]


def test_the_plot_shows_em_beside_f1_with_a_colour_per_system_whatever_its_rank(evaluated, test_split):
    from matplotlib.colors import to_hex
    from PIL import Image

    output_dir, results = evaluated
    with Image.open(output_dir / "by_category.png") as image:
        _, _, width, height = plot_layout(len({blank["category"] for blank in test_split}), len(SYSTEMS) + 2)
        assert image.format == "PNG" and image.size == (round(100 * width), round(100 * height))
        assert sum(1 for count in image.convert("L").histogram() if count) > 20  # bars and text, not a blank canvas
    figure = category_figure(results)
    assert [ax.get_title() for ax in figure.axes] == ["F1 by category", "EM by category"]
    styles = bar_styles(figure)
    colours = {name: to_hex(colour) for name, colour in system_colours(list(SYSTEMS)).items()}
    for panel in styles:
        assert {name: panel[name] for name in SYSTEMS} == {name: (colours[name], None) for name in SYSTEMS}
        baselines = [style for name, style in panel.items() if name.endswith("(baseline)")]
        assert sorted(baselines) == sorted((to_hex(colour), hatch) for colour, hatch in BASELINE_STYLES.values())
    # Another run where the systems rank otherwise: the same colours.
    reranked = json.loads(json.dumps(results))
    for name, row in reranked["systems"].items():
        row["f1"] = {"half": 90.0, "annotator": 10.0, "partial": 50.0}[name]
    assert bar_styles(category_figure(reranked)) == styles
    assert len(set(colours.values())) == len(SYSTEMS)
    assert min(label.get_fontsize() for label in figure.axes[0].get_xticklabels()) >= 11


def test_every_bar_has_its_whisker_even_at_zero_and_one_resample_plots(test_split, tmp_path):
    from matplotlib.container import ErrorbarContainer
    from PIL import Image

    path = write_rows(tmp_path / "nothing.jsonl", prediction_rows(test_split, lambda index, blank: ""))
    # One resample: an interval need not hold the mean (the whisker was a negative length, a traceback).
    assert main(["evaluate", str(path), "--output_dir", str(tmp_path / "out"), "--num_bootstrap", "1"]) == 0
    with Image.open(tmp_path / "out" / "by_category.png") as image:
        assert image.format == "PNG"
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    figure = category_figure(results)
    for ax in figure.axes:
        (bars,) = [container for container in ax.containers if container.get_label() == "nothing"]
        assert [bar.get_height() for bar in bars] == [0.0] * 3
        (whiskers,) = [container for container in ax.containers if isinstance(container, ErrorbarContainer)]
        _, caps, _ = whiskers.lines
        assert len(caps) == 2 and all(list(cap.get_ydata()) == [0.0] * 3 for cap in caps)  # low and high, at 0
        assert ax.get_ylim()[0] < 0  # the caps at 0 stand clear of the axis


def test_a_matplotlib_that_fails_to_import_costs_the_plot_only(predictions_dir, tmp_path):
    """An installed matplotlib that cannot be imported (a broken install) is a warning: the results are written, the
    plot is not. The command runs as a user runs it, with such a matplotlib first on its path."""
    broken = tmp_path / "site" / "matplotlib"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('this matplotlib is broken')\n")
    output_dir = tmp_path / "out"
    path = os.pathsep.join(filter(None, [str(broken.parent), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    result = subprocess.run(["fiberbench", "evaluate", str(predictions_dir / "half.jsonl"), "--output_dir",
                             str(output_dir), *FLAGS], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "this matplotlib is broken" in result.stderr and "no by_category.png" in result.stderr
    assert "Traceback" not in result.stderr
    assert {path.name for path in output_dir.iterdir()} >= {"results.json", "results.md"}
    assert not (output_dir / "by_category.png").exists()


def test_the_model_card_holds_the_scores_of_results_json(predictions_dir, tmp_path):
    card_path, output = tmp_path / "README.md", tmp_path / "evaluation"
    args = ["evaluate", str(predictions_dir / "half.jsonl"), "--names", "T5 (tiny)", "--output_dir", str(output), *FLAGS]
    assert main([*args, "--model_index", str(card_path)]) == 0
    row = json.loads((output / "results.json").read_text())["systems"]["T5 (tiny)"]
    card = ModelCard.load(card_path)
    assert card.data.model_name == "T5 (tiny)"
    assert {(result.metric_type, result.metric_name): result.metric_value for result in card.data.eval_results} == {
        ("exact_match", "EM"): round(row["exact_match"], 2),
        ("f1", "F1"): round(row["f1"], 2),
        ("exact_match", "EM, label only"): round(row["exact_match_label_only"], 2),
        ("f1", "F1, label only"): round(row["f1_label_only"], 2),
        ("vqa_accuracy", "VQA accuracy"): round(row["vqa_accuracy"], 2),
        ("correct_at_1", "Correct@1"): round(row["correct_at_k"]["1"], 2),
        ("map", "MAP"): round(row["map"], 2),
    }
    result = card.data.eval_results[0]
    assert (result.task_type, result.dataset_type, result.dataset_split, result.dataset_config, result.dataset_name) == (
        "video-text-to-text", "fiber", "test", "text", "FIBER (SYNTHETIC sample)")
    # An existing card keeps its text and other metadata.
    card_path.write_text("---\nlicense: apache-2.0\n---\n\n# My model\n\nTrained on FIBER.\n")
    assert main([*args[:4], "--model_index", str(card_path), *FLAGS]) == 0
    card = ModelCard.load(card_path)
    assert card.data.license == "apache-2.0" and card.text.strip() == "# My model\n\nTrained on FIBER."
    assert {result.metric_name for result in card.data.eval_results} >= {"EM", "F1"}


def test_several_systems_for_one_card_are_refused_in_one_line(predictions_dir, tmp_path, cli_error):
    files = [predictions_dir / f"{name}.jsonl" for name in SYSTEMS]
    status, line = cli_error("evaluate", *files, "--model_index", tmp_path / "README.md")
    assert (status, line) == (2, "fiberbench evaluate: error: --model_index: a model card describes one model; give one "
                                 "predictions file, not 3")
    assert not (tmp_path / "README.md").exists()
