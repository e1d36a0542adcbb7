"""The FIBER leaderboard Space: the board of the stored results, and a Submit tab that scores on the server.

leaderboard.json, beside this file, says where the results are and which split they score. The split's answers are
loaded here and never sent to the browser: the page gets scores only. The board is computed once per revision of the
store, and again when a page load or a submission finds the store moved.
"""

import json
import threading
from pathlib import Path

import gradio as gr

from fiberbench.metric.evaluate.predictions import load_split
from src.display import (COLUMN_WIDTHS, COLUMNS, DATATYPES, PAIRWISE_TEXT, RANKS_TEXT, REPORTED, category_chart,
                         introduction, pairwise_html, paper_rows, sorted_rows, table_rows)
from src.populate import compute_board, open_store, read_entries
from src.submission import BOUNDS, KINDS, MAX_FILE_BYTES, Refused, check_metadata, submit

HERE = Path(__file__).resolve().parent
CONFIG = json.loads((HERE / "leaderboard.json").read_text(encoding="utf-8"))
CHART_SYSTEMS = 3  # the by-category chart shows the best three systems until others are chosen
UPLOADS_KEPT_S = 3600  # an uploaded predictions file is deleted between one and two hours after it came

split = load_split(CONFIG["dataset_name"], CONFIG["dataset_config_name"], CONFIG["split"])
store = open_store(CONFIG["results_repo"], HERE / CONFIG["results_dir"] if CONFIG["results_dir"] else None)
_computing, _board = threading.Lock(), {}


def current_board() -> tuple[str, dict]:
    """(revision, board) at the store's head now, computed once per revision (one computation at a time)."""
    head = store.head(CONFIG["split"])
    with _computing:
        if _board.get("head") != head:
            entries = read_entries(store.snapshot(CONFIG["split"], head), CONFIG["split"])
            _board.update(head=head, board=compute_board(split, CONFIG["settings"], entries))
        return head, _board["board"]


def refresh(sort_by: str, metric: str, chosen: list[str] | None):
    head, board = current_board()
    names = [row[2] for row in table_rows(board) if row[0] != "baseline"]
    chosen = [name for name in (chosen or names[:CHART_SYSTEMS]) if name in names]
    return (
        sorted_rows(table_rows(board), sort_by),
        pairwise_html(board, "f1" if metric == "F1" else "exact_match"),
        gr.CheckboxGroup(choices=names, value=chosen),
        category_chart(board, chosen),
        head,
    )


def send(upload, system, link, kind, video_input, frames, answer_reading, seen_head, sort_by, metric, chosen):
    try:
        if upload is None:
            raise Refused("predictions file: choose one")
        metadata = check_metadata(system, link, kind, video_input, frames, answer_reading)
        submit(split, CONFIG["settings"], store, Path(upload), metadata, Path(upload).name, parent=seen_head)
        message = f"Stored: {metadata['system']} is on the board."
    except Refused as refusal:
        message = f"Refused: {refusal}"
    except OSError as error:  # the Hub's HTTP errors among them: the commit did not happen
        message = f"Not stored: {store.describe()} could not be written ({(str(error).splitlines() or [''])[0]}); " \
                  "submit again later"
    return (message, *refresh(sort_by, metric, chosen))


# Gradio keeps an upload at a path made of its content's digest and its name, so the same file sent twice at once is
# one path: deleting it after one submission would take it from under the other. Gradio's own sweep deletes old ones.
with gr.Blocks(title=CONFIG["title"], delete_cache=(UPLOADS_KEPT_S, UPLOADS_KEPT_S)) as demo:
    gr.Markdown(introduction(CONFIG["title"], split.dataset, CONFIG["settings"]))
    head = gr.State(None)
    with gr.Tab("Leaderboard"):
        sort_by = gr.Dropdown([c for c in COLUMNS if c != "rank interval"], value="F1", label="sort by", elem_id="sort")
        table = gr.Dataframe(headers=COLUMNS, datatype=DATATYPES, column_widths=COLUMN_WIDTHS, interactive=False,
                             elem_id="board", wrap=True, show_search="none")
        gr.Markdown(RANKS_TEXT)
        gr.Markdown(f"### {REPORTED.capitalize()} (Table 3): not scored here, no interval, never ranked")
        gr.Dataframe(value=paper_rows(CONFIG["split"]), headers=["method", "EM", "F1", "source"],
                     datatype=["str", "number", "number", "str"], interactive=False, elem_id="paper")
        gr.Markdown(PAIRWISE_TEXT)
        metric = gr.Radio(["F1", "EM"], value="F1", label="pairwise metric")
        pairwise = gr.HTML(elem_id="pairwise")
        chosen = gr.CheckboxGroup(label="systems in the chart (the baselines are always shown)", elem_id="chosen")
        chart = gr.Plot(label="F1 and EM by category", elem_id="chart")
    with gr.Tab("Submit"):
        gr.Markdown(f"Your predictions are scored here by the code of `fiberbench evaluate`. {BOUNDS}")
        upload = gr.File(label="predictions file", file_types=[".jsonl", ".json", ".csv"], elem_id="upload")
        system = gr.Textbox(label="system name", elem_id="system")
        link = gr.Textbox(label="link (paper, code or model; optional)", elem_id="link")
        kind = gr.Dropdown(list(KINDS), value="video", label="kind", elem_id="kind")
        video_input = gr.Textbox(label="video input (e.g. frames as a video, I3D features; optional)")
        frames = gr.Number(label="frames per clip (optional)", precision=0)
        answer_reading = gr.Textbox(label="answer reading (how the answer is taken from the reply; optional)")
        button = gr.Button("Submit", elem_id="submit")
        status = gr.Textbox(label="submission", interactive=False, elem_id="status")
    outputs, shown_by = [table, pairwise, chosen, chart, head], [sort_by, metric, chosen]
    demo.load(refresh, inputs=shown_by, outputs=outputs, api_name="board")
    for control in (sort_by, metric):
        control.change(refresh, inputs=shown_by, outputs=outputs)
    chosen.input(refresh, inputs=shown_by, outputs=outputs)
    button.click(send, inputs=[upload, system, link, kind, video_input, frames, answer_reading, head, *shown_by],
                 outputs=[status, *outputs], api_name="submit", concurrency_limit=4)

if __name__ == "__main__":
    demo.launch(max_file_size=MAX_FILE_BYTES)  # larger uploads are refused by Gradio before they land
