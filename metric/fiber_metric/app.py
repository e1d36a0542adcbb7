"""The Hub Space of the FIBER metric: a Gradio page that scores answers with the metric module beside this file.

evaluate's own `launch_gradio_widget` is written for Gradio 3 (`gr.inputs`, removed since), so the
Space defines its small interface itself: one row per blank, the answer and its correct answers.
A table the metric cannot score (a row without correct answers, another number of columns, more
rows than the page takes) is refused with a message on the page, not an empty result.
"""

import math
from pathlib import Path

import evaluate
import gradio as gr

HERE = Path(__file__).resolve().parent
# A path to the module file, not to the folder: a Space is cloned under a name that is not fiber_metric.
metric = evaluate.load(str(HERE / "fiber_metric.py"))

ANSWER_SEPARATOR = "|"
HEADERS = ["prediction", f"correct answers (separated by {ANSWER_SEPARATOR})"]
# A shared Space scores one table at a time: 50,000 rows held its queue for over a minute. Larger
# sets go through `evaluate.load` or `fiberbench evaluate`.
MAX_ROWS = 1_000
EXAMPLE = [
    ["a mountain", "adirondacks | cliff | frozen waterfall | icy cliff | mountain | slope"],
    ["icy mountain", "adirondacks | cliff | frozen waterfall | icy cliff | mountain | slope"],
    ["a gym", "building | foyer | his house | living room | room"],
]


def cell_text(cell) -> str:
    """A cell as text: an empty or null cell (None, or pandas' NaN) is "", not "None"."""
    return "" if cell is None or (isinstance(cell, float) and math.isnan(cell)) else str(cell)


def score(table) -> dict:
    """fiber_metric's scores of the table's rows (a pandas DataFrame: prediction, correct answers).

    Blank rows are left out; the correct answers are the non-empty pieces between separators.
    """
    if table.shape[1] != 2:
        raise gr.Error(f"The table has {table.shape[1]} columns: give 2, the prediction and its correct answers.")
    rows = [[cell_text(cell) for cell in row] for row in table.values.tolist()]
    rows = [row for row in rows if any(cell.strip() for cell in row)]
    if len(rows) > MAX_ROWS:
        raise gr.Error(
            f"The table has {len(rows):,} rows: the page scores at most {MAX_ROWS:,}. Score more with "
            "evaluate.load (see below)."
        )
    predictions, references = [], []
    for number, (prediction, answers) in enumerate(rows, start=1):
        pieces = [answer.strip() for answer in answers.split(ANSWER_SEPARATOR) if answer.strip()]
        if not pieces:
            raise gr.Error(f"Row {number} has no correct answers: give at least one, separated by {ANSWER_SEPARATOR}.")
        predictions.append(prediction)
        references.append(pieces)
    return metric.compute(predictions=predictions, references=references, per_example=True)


def card_body() -> str:
    """The metric card without its YAML header, shown under the form."""
    text = (HERE / "README.md").read_text(encoding="utf-8")
    return text.split("---", 2)[2] if text.startswith("---") else text


demo = gr.Interface(
    fn=score,
    inputs=gr.Dataframe(headers=HEADERS, value=EXAMPLE, column_count=(2, "fixed"), datatype=["str", "str"]),
    outputs=gr.JSON(label="fiber_metric"),
    title="FIBER metric",
    description=(
        "Exact match and token-set F1 (in percent) of fill-in-the-blank answers against many correct answers. "
        f"One row per blank, at most {MAX_ROWS:,} rows; more go through evaluate.load (see below)."
    ),
    article=card_body(),
    flagging_mode="never",
    api_name="score",
)

if __name__ == "__main__":
    demo.launch()
