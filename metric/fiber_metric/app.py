"""The Hub Space of the FIBER metric: a Gradio page that scores a table of answers with the metric module beside it.

evaluate's own `launch_gradio_widget` is written for Gradio 3 (`gr.inputs`, removed since), so the Space defines its
small interface itself: one row per blank, the answer and its correct answers. A table the metric cannot score (a row
without correct answers, another number of columns, more rows than the page takes) is refused with a message.
"""

import math
from pathlib import Path

import evaluate
import gradio as gr

HERE = Path(__file__).resolve().parent
# A path to the module file, not to the folder: a Space is cloned under a name that is not fiber_metric.
metric = evaluate.load(str(HERE / "fiber_metric.py"))
SEPARATOR = "|"
# A shared Space scores one table at a time (50,000 rows held its queue for a minute): more go through evaluate.load.
MAX_ROWS = 1_000
EXAMPLE = [
    ["a mountain", "adirondacks | cliff | frozen waterfall | icy cliff | mountain | slope"],
    ["icy mountain", "adirondacks | cliff | frozen waterfall | icy cliff | mountain | slope"],
    ["a gym", "building | foyer | his house | living room | room"],
]


def score(table) -> dict:
    """The metric's scores of the table's rows (prediction, correct answers separated by "|"); blank rows left out."""
    if table.shape[1] != 2:
        raise gr.Error(f"The table has {table.shape[1]} columns: give 2, the prediction and its correct answers.")
    # An empty cell is None or pandas' NaN: the empty answer, not "None".
    rows = [["" if cell is None or (isinstance(cell, float) and math.isnan(cell)) else str(cell) for cell in row]
            for row in table.values.tolist()]
    rows = [row for row in rows if any(cell.strip() for cell in row)]
    if len(rows) > MAX_ROWS:
        raise gr.Error(f"The table has {len(rows):,} rows: the page scores at most {MAX_ROWS:,}. Score more with "
                       "evaluate.load (see below).")
    references = [[answer.strip() for answer in answers.split(SEPARATOR) if answer.strip()] for _, answers in rows]
    for number, answers in enumerate(references, start=1):
        if not answers:
            raise gr.Error(f"Row {number} has no correct answers: give at least one, separated by {SEPARATOR}.")
    return metric.compute(predictions=[row[0] for row in rows], references=references, per_example=True)


card = (HERE / "README.md").read_text(encoding="utf-8")
demo = gr.Interface(
    fn=score,
    inputs=gr.Dataframe(headers=["prediction", f"correct answers (separated by {SEPARATOR})"], value=EXAMPLE,
                        column_count=(2, "fixed"), datatype=["str", "str"]),
    outputs=gr.JSON(label="fiber_metric"),
    title="FIBER metric", flagging_mode="never", api_name="score",
    description="Exact match and token-set F1 (in percent) of fill-in-the-blank answers against many correct answers. "
    f"One row per blank, at most {MAX_ROWS:,} rows; more go through evaluate.load (see below).",
    article=card.split("---", 2)[2] if card.startswith("---") else card,  # the card without its YAML header
)

if __name__ == "__main__":
    demo.launch()
