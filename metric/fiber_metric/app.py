"""The Hub Space of the FIBER metric: a Gradio page that scores answers with the metric module beside this file.

evaluate's own `launch_gradio_widget` is written for Gradio 3 (`gr.inputs`, removed since), so the
Space defines its small interface itself: one row per blank, the answer and its correct answers.
"""

from pathlib import Path

import evaluate
import gradio as gr

HERE = Path(__file__).resolve().parent
# A path to the module file, not to the folder: a Space is cloned under a name that is not fiber_metric.
metric = evaluate.load(str(HERE / "fiber_metric.py"))

ANSWER_SEPARATOR = "|"
HEADERS = ["prediction", f"correct answers (separated by {ANSWER_SEPARATOR})"]
EXAMPLE = [
    ["a mountain", "adirondacks | cliff | frozen waterfall | icy cliff | mountain | slope"],
    ["icy mountain", "adirondacks | cliff | frozen waterfall | icy cliff | mountain | slope"],
    ["a gym", "building | foyer | his house | living room | room"],
]


def score(table) -> dict:
    """fiber_metric's scores of the table's rows (a pandas DataFrame: prediction, correct answers)."""
    rows = [row for row in table.values.tolist() if any(str(cell).strip() for cell in row)]
    predictions = [str(prediction) for prediction, _ in rows]
    references = [[answer.strip() for answer in str(answers).split(ANSWER_SEPARATOR)] for _, answers in rows]
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
    description="Exact match and token-set F1 (in percent) of fill-in-the-blank answers against many correct answers.",
    article=card_body(),
    flagging_mode="never",
    api_name="score",
)

if __name__ == "__main__":
    demo.launch()
