"""What `fiberbench evaluate` tells beside the scores, on the bundled sample: coverage (blanks missing, scored both
ways), the gain from the video over a blind control, agreement-weighted accuracy, the release's F1, rank intervals
coherent with the corrected comparisons; and that what a file gives is shown as text and a model card is written only
where the command may write."""

import json
from collections import Counter

import numpy as np
import pytest

from fiberbench.cli import main
from fiberbench.data import load_sample
from fiberbench.metric import (annotators_from_example, normalize_answer, references_from_example,
                               score_predictions)
from fiberbench.records import KEY_FIELDS, clip_id, clips_fingerprint

from ..readme_walks import DOCS, block_run
from .test_evaluate_command import FLAGS, SETTINGS, label_half_the_time, prediction_rows, write_rows


@pytest.fixture(scope="module")
def test_split():
    return load_sample("text")["test"].to_list()


def evaluate(tmp_path, files, *flags) -> tuple[dict, str]:
    """results.json and results.md of `fiberbench evaluate` of `files` (paths) with `flags`."""
    output_dir = tmp_path / "out"
    assert main(["evaluate", *map(str, files), "--output_dir", str(output_dir), *FLAGS, *flags]) == 0
    return json.loads((output_dir / "results.json").read_text()), (output_dir / "results.md").read_text()


def test_missing_blanks_are_not_wrong_answers_and_are_also_scored_as_the_paper_would(test_split, tmp_path, caplog):
    missing = {3, 10, 11, 40}
    rows = prediction_rows(test_split, label_half_the_time)
    rows = [{**row, "missing": True, "prediction": ""} if index in missing else row for index, row in enumerate(rows)]
    partial = write_rows(tmp_path / "partial.jsonl", [row for index, row in enumerate(rows) if index != 11]
                         + [{key: rows[11][key] for key in KEY_FIELDS} | {"missing": True}])  # no prediction needed
    whole = write_rows(tmp_path / "whole.jsonl", prediction_rows(test_split, label_half_the_time))
    results, markdown = evaluate(tmp_path, [partial, whole])
    row, kept = results["systems"]["partial"], [index not in missing for index in range(60)]
    answered = [label_half_the_time(index, blank) for index, blank in enumerate(test_split) if kept[index]]
    references = [references_from_example(blank) for index, blank in enumerate(test_split) if kept[index]]
    expected = score_predictions(answered, references, **SETTINGS)
    assert (row["f1"], row["confidence_intervals"]["f1"]) == (expected["f1"], expected["f1_ci"])
    clips = [clip_id(*(blank[key] for key in KEY_FIELDS)) for index, blank in enumerate(test_split) if kept[index]]
    assert row["coverage"] == {"answered": 56, "blanks": 60, "missing": 4, "clips_fingerprint": clips_fingerprint(clips)}
    as_paper = [0.0 if index in missing else score for index, score in enumerate(score_predictions(
        [label_half_the_time(index, blank) for index, blank in enumerate(test_split)],
        [references_from_example(blank) for blank in test_split], per_example=True)["f1_per_example"])]
    assert row["missing_as_wrong"]["f1"] == pytest.approx(np.mean(as_paper))
    assert "- partial: 56 of 60 blanks answered; 4 clips missing. Missing counted as wrong, as the paper would" in markdown
    # Comparisons and ranks on the blanks both answered, said in words and in one warning line.
    assert results["compared_blanks"] == 56 and results["clips_differ"]
    assert "the ranks and comparisons use the 56 blanks all of them answered" in markdown
    assert "On the 56 blanks every system answered" in markdown
    (comparison,) = [c for c in results["comparisons"] if c["metric"] == "f1"]
    assert comparison["difference"] == pytest.approx(0.0) and comparison["p_value"] == 1.0
    assert any("answered different sets of clips" in record.message for record in caplog.records)
    assert results["systems"]["whole"]["coverage"]["missing"] == 0 and "missing_as_wrong" not in results["systems"]["whole"]


def test_a_system_given_as_its_own_control_gains_nothing_from_the_video(test_split, tmp_path, caplog):
    path = write_rows(tmp_path / "system.jsonl", prediction_rows(test_split, label_half_the_time))
    results, markdown = evaluate(tmp_path, [path], "--names", "A = B", "--control", f"A = B={path}")
    gain = results["systems"]["A = B"]["video_gain"]
    assert gain["control"] == str(path) and gain["count"] == 60
    for metric in ("f1", "exact_match", "vqa_accuracy"):
        assert gain[metric]["gain"] == 0.0 and gain[metric]["gain_ci"] == [0.0, 0.0] and gain[metric]["p_value"] == 1.0
        assert gain[metric]["with_video"] == gain[metric]["without_video"] == results["systems"]["A = B"][metric]
    assert set(gain["by_category"]) == {blank["category"] for blank in test_split}
    assert sum(found["count"] for found in gain["by_category"].values()) == 60
    assert "- A = B: the F1 gain's interval holds zero: on these blanks the system is not shown to do better" in markdown
    assert "does not say it was made without the video" in caplog.text  # a file predict did not make with --video_input none


def test_a_gain_that_is_there_is_told(test_split, tmp_path):
    with_video = write_rows(tmp_path / "a.jsonl", prediction_rows(test_split, lambda index, blank: blank["label"]))
    blind = write_rows(tmp_path / "blind.jsonl", prediction_rows(test_split, label_half_the_time))
    results, markdown = evaluate(tmp_path, [with_video], "--control", f"a={blind}")
    gain = results["systems"]["a"]["video_gain"]["exact_match"]
    assert gain["gain"] == 50.0 and gain["gain_ci"][0] > 0 and gain["p_value"] < 1e-6
    assert "interval holds zero" not in markdown and "## Gain from the video" in markdown


def votes(blank: dict) -> list[tuple[str, int]]:
    """A blank's normalized answers, each with the number of its annotators (the label one of them) who gave it."""
    return Counter(answer for answers in annotators_from_example(blank)
                   for answer in {normalize_answer(given) for given in answers}).most_common()


def test_agreement_weighted_accuracy_separates_the_answer_most_gave_from_one_few_gave(test_split, tmp_path):
    most = write_rows(tmp_path / "most.jsonl", prediction_rows(test_split, lambda index, blank: votes(blank)[0][0]))
    fewest = write_rows(tmp_path / "fewest.jsonl", prediction_rows(test_split, lambda index, blank: votes(blank)[-1][0]))
    results, markdown = evaluate(tmp_path, [most, fewest])
    systems = results["systems"]
    assert systems["most"]["exact_match"] == systems["fewest"]["exact_match"] == 100.0  # EM cannot tell them apart
    assert systems["most"]["vqa_accuracy"] > systems["fewest"]["vqa_accuracy"] + 20
    (comparison,) = [c for c in results["comparisons"] if c["metric"] == "vqa_accuracy"]
    assert comparison["systems"] == ["most", "fewest"] and comparison["p_value_holm"] < 0.05
    assert comparison["difference_ci"][0] > 0
    low, high = systems["most"]["confidence_intervals"]["vqa_accuracy"]
    assert low <= systems["most"]["vqa_accuracy"] <= high
    assert "| most | VQA accuracy" not in markdown and "| most | fewest | VQA accuracy |" in markdown


def test_the_release_f1_is_shown_on_request_beside_the_f1_to_report(test_split, tmp_path):
    path = write_rows(tmp_path / "a.jsonl", prediction_rows(test_split, lambda index, blank: blank["label"].upper() + "!"))
    plain, _ = evaluate(tmp_path, [path])
    assert "f1_release" not in plain["systems"]["a"]
    results, markdown = evaluate(tmp_path, [path], "--overwrite_output_dir", "--release_f1")
    row = results["systems"]["a"]
    # Normalized, "A MAN!" is the label: F1 100. Split on white space as the release did, it shares only the tokens
    # that case and punctuation leave alone ("3" in "A 3 D PRINTER!") with the label.
    labels = [set(blank["label"].split()) for blank in test_split]
    raw = [set((blank["label"].upper() + "!").split()) for blank in test_split]
    expected = np.mean([200 * len(a & b) / (len(a) + len(b)) for a, b in zip(raw, labels)])
    assert row["f1"] == 100.0 and row["f1_release_label_only"] == pytest.approx(expected) and expected < 20
    assert row["f1_release"] < row["f1"]
    assert len(row["confidence_intervals"]["f1_release"]) == 2
    assert "| F1 (release) |" in markdown and "F1 is the paper's text's definition, the one to report" in markdown


def test_rank_intervals_never_separate_systems_the_corrected_comparisons_do_not(test_split, tmp_path):
    rng = np.random.default_rng(0)
    files = []
    for name, skill in {"best": 0.95, "delta": 0.6, "tied a": 0.5, "tied b": 0.5, "worst": 0.05}.items():
        right = rng.random(60) < skill
        files.append(write_rows(tmp_path / f"{name}.jsonl", prediction_rows(
            test_split, lambda index, blank, right=right: blank["label"] if right[index] else "a thing")))
    results, markdown = evaluate(tmp_path, files)
    systems = results["systems"]
    holm = {tuple(c["systems"]): c["p_value_holm"] for c in results["comparisons"] if c["metric"] == "f1"}
    for (a, b), p_value in holm.items():
        (low_a, high_a), (low_b, high_b) = systems[a]["rank_interval"], systems[b]["rank_interval"]
        if high_a < low_b or high_b < low_a:
            assert p_value < 0.05, (a, b)
    assert systems["best"]["rank_interval"] == [1, 1] and systems["worst"]["rank_interval"] == [5, 5]
    assert [systems[name]["rank"] for name in systems] == [1, 2, 3, 4, 5]
    assert "so that two systems whose intervals do not overlap always differ significantly" in markdown


def test_what_a_file_gives_is_shown_as_text_on_the_terminal_and_in_results_md(test_split, tmp_path, capsys):
    reader = {"version": "2 | fake | row |\n| 9 | forged | 100 |", "spacy_model": "<script>x</script>\x1b[2J\u202e"}
    rows = [{**row, "reader": reader} for row in prediction_rows(test_split, label_half_the_time)]
    _, markdown = evaluate(tmp_path, [write_rows(tmp_path / "a.jsonl", rows)], "--names", "A\x1b[31m red")
    printed = capsys.readouterr().out
    for shown in (markdown, printed):
        assert "\x1b" not in shown and "\u202e" not in shown and "<script>" not in shown
        assert not any(line.startswith("| 9 |") for line in shown.splitlines())
    assert "\\<script\\>x\\</script\\>" in markdown and "A\ufffd\\[31m red" in markdown


@pytest.mark.parametrize("where", ["the dataset's card", "another run's results.md", "this run's --output_dir"])
def test_a_model_card_is_written_only_where_the_command_may_write(where, test_split, tmp_path, cli_error):
    path = write_rows(tmp_path / "a.jsonl", prediction_rows(test_split, label_half_the_time))
    dataset = tmp_path / "fiber"
    (dataset / "data").mkdir(parents=True)
    for name, split in load_sample("text").items():
        split.to_parquet(dataset / "data" / f"{name}.parquet")
    (dataset / "README.md").write_text("# My FIBER build\n")
    flags = ["--dataset_name", dataset, "--dataset_config_name", "default", "--num_bootstrap", "10"]
    assert main(["evaluate", str(path), "--output_dir", str(tmp_path / "earlier"), *map(str, flags)]) == 0
    card = {"the dataset's card": dataset / "README.md", "another run's results.md": tmp_path / "earlier" / "results.md",
            "this run's --output_dir": tmp_path / "out" / "README.md"}[where]
    before = card.read_bytes() if card.exists() else None
    status, line = cli_error("evaluate", path, "--model_index", card, "--output_dir", tmp_path / "out", *flags)
    problem = {"the dataset's card": "it is an input of this command", "another run's results.md":
               "another fiberbench run wrote it", "this run's --output_dir": "it is in --output_dir, which this run writes"}[where]
    assert status == 2 and line.endswith(f"--model_index {card}: {problem}; give a model card's README.md"), line
    assert (card.read_bytes() if card.exists() else None) == before and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_docs_show_the_gain_from_the_video_and_agreement_weighted_accuracy_on_the_sample(tmp_path_factory):
    """Score your own system's blocks: the main job's model against the same recipe trained without video (standing
    in for its blind control), whose gain excludes zero (the sample's features carry the answer); and the systems made
    from the annotators' answers, alike in EM, apart in VQA accuracy."""
    repository, _ = block_run(tmp_path_factory, DOCS / "score-your-own-system.md", "outputs/video_gain")
    gain = json.loads((repository / "outputs/video_gain/results.json").read_text())["systems"]["T5 + I3D (tiny)"]
    for metric in ("f1", "exact_match", "vqa_accuracy"):
        assert gain["video_gain"][metric]["gain_ci"][0] > 0 and gain["video_gain"][metric]["p_value"] < 0.05
    assert gain["f1_release"] != gain["f1"]
    results = json.loads((repository / "outputs/agreement/evaluation/results.json").read_text())
    most, fewest = results["systems"]["most_annotators"], results["systems"]["fewest_annotators"]
    assert most["exact_match"] == fewest["exact_match"] == 100.0 and most["vqa_accuracy"] > fewest["vqa_accuracy"]
