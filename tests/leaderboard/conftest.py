"""Fixtures of the leaderboard tests: predictions files on the bundled sample's test split. "best" answers every
blank's label; "tied A" and "tied B" as many, on different blanks ("a thing" elsewhere); "near" those of "tied A" and
four more: a clearly best system, a near-tie (raw p below 0.05, not after Holm's correction) and a tied pair."""

import json
from pathlib import Path

import pytest

from fiberbench.data import load_sample
from fiberbench.outputs import write_jsonl
from fiberbench.records import KEY_FIELDS

# Few resamples: the sample has 60 blanks, and each board is computed in seconds on a busy machine.
SETTINGS = {"confidence_level": 0.95, "num_bootstrap": 1000, "seed": 0}
FLAGS = ["--confidence_level", "0.95", "--num_bootstrap", "1000", "--seed", "0"]


def tied_a(index: int) -> bool:
    return index % 8 in (0, 1, 4)


SYSTEMS = {"best": lambda index: True, "near": lambda index: tied_a(index) or index in (6, 7, 14, 15), "tied A": tied_a,
           "tied B": lambda index: index % 8 in (2, 3, 5)}


@pytest.fixture(scope="session")
def sample_splits() -> dict[str, list[dict]]:
    sample = load_sample("text")
    return {name: sample[name].to_list() for name in ("test", "validation")}


def prediction_rows(blanks: list[dict], right) -> list[dict]:
    """One row per blank: its label where `right(index)`, else "a thing"."""
    return [{field: blank[field] for field in KEY_FIELDS} | {"prediction": blank["label"] if right(index) else "a thing"}
            for index, blank in enumerate(blanks)]


@pytest.fixture(scope="session")
def predictions_files(tmp_path_factory, sample_splits) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("predictions")
    files = {}
    for name, right in SYSTEMS.items():
        files[name] = folder / f"{name.replace(' ', '_')}.jsonl"
        write_jsonl(files[name], prediction_rows(sample_splits["test"], right))
    return files


@pytest.fixture(scope="session")
def worst_file(tmp_path_factory, sample_splits) -> Path:
    """"a thing" for every blank: last on the board, whatever else is on it, so adding it moves no other rank."""
    path = tmp_path_factory.mktemp("worst") / "worst.jsonl"
    write_jsonl(path, prediction_rows(sample_splits["test"], lambda index: False))
    return path


@pytest.fixture(scope="session")
def bad_files(tmp_path_factory, sample_splits) -> dict[str, Path]:
    """Submissions the board refuses, by what is wrong with them."""
    folder = tmp_path_factory.mktemp("bad")
    test = prediction_rows(sample_splits["test"], tied_a)
    files = {name: folder / f"{name.replace(' ', '_')}.jsonl" for name in ("other split", "missing")}
    write_jsonl(files["other split"], prediction_rows(sample_splits["validation"], tied_a))
    write_jsonl(files["missing"], test[1:])
    files["not json"] = folder / "not_json.jsonl"
    files["not json"].write_text("this is not JSON\n")
    files["too large"] = folder / "too_large.json"
    with files["too large"].open("w") as file:  # 50 MB of one JSON array
        file.write(json.dumps(test) + " " * (50 * 2**20))
    # Each past one bound, refused before reading it costs more than a pass over its text.
    files["long line"] = folder / "long_line.jsonl"
    write_jsonl(files["long line"], [{**test[0], "note": "x" * 2**21}, *test[1:]])
    files["deep line"] = folder / "deep_line.jsonl"
    files["deep line"].write_text(json.dumps(test[0])[:-1] + ', "x": ' + "[" * 30_000 + "]" * 30_000 + "}\n")
    files["many columns"] = folder / "many_columns.csv"
    files["many columns"].write_text(",".join(f"c{index}" for index in range(1_000)) + "\n")
    files["long answer"] = folder / "long_answer.jsonl"
    write_jsonl(files["long answer"], [{**test[0], "prediction": "a dog " * 200}, *test[1:]])
    files["long value"] = folder / "long_value.jsonl"  # quoted in the refusal, which stays a short line
    write_jsonl(files["long value"], [{**test[0], "candidates": "x" * 60_000}, *test[1:]])
    files["unclosed string"] = folder / "unclosed_string.json"  # a JSON string never closed: still one pass
    files["unclosed string"].write_text('["' + '\\"' * 2**20)
    return files
