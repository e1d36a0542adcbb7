"""The FIBER leaderboard Space: the board of the store leaderboard.json names, and a Submit tab that scores on the
server (the split's answers never reach the browser); the board is updated once per revision of the store."""

import json
import threading
from pathlib import Path

import gradio as gr

from fiberbench.errors import FiberbenchError, describe
from fiberbench.metric.evaluate.predictions import load_split
from fiberbench.metric.evaluate.report import METRIC_NAMES
from src.display import (ALL, COLUMNS, F1_TEXT, NUMBERS, PAIRWISE_TEXT, RANKS_TEXT, REPORTED, WIDTHS, category_chart,
                         introduction, pairwise_html, paper_rows, table_rows)
from src.metadata import FIELDS, KINDS, SIGNS, VIDEO_INPUTS, Refused, check_metadata
from src.populate import Board, HubStore, LocalStore
from src.submission import BOUNDS, FORMATS, MAX_FILE_BYTES, DailyLimit, submit

CONFIG = json.loads((Path(__file__).resolve().parent / "leaderboard.json").read_text(encoding="utf-8"))
CHART_SYSTEMS = 3  # the by-category chart shows the best three systems until others are chosen
UPLOADS_KEPT_S = 3600  # an uploaded predictions file is deleted between one and two hours after it came

split = load_split(CONFIG["dataset_name"], CONFIG["dataset_config_name"], CONFIG["split"])
store = HubStore(CONFIG["results_repo"]) if CONFIG["results_repo"] else LocalStore(Path(CONFIG["results_dir"]))
board_of_store, limit = Board(split, CONFIG["settings"]), DailyLimit(CONFIG["submissions_per_day"])
_computing, _board = threading.Lock(), {}


def current_board() -> tuple[str, dict]:
    """(revision, board) at the store's head now, updated once per revision (one update at a time)."""
    head = store.head(CONFIG["split"])
    with _computing:
        if _board.get("head") != head:
            _board.update(head=head, board=board_of_store.update(*store.read(CONFIG["split"], head)))
        return head, _board["board"]


def refresh(metric: str, chosen: list[str] | None, kind: str, open_weights: str, video_input: str):
    try:
        head, board = current_board()
    except (FiberbenchError, OSError, Refused) as error:
        raise gr.Error(describe(error)) from None
    names = list(board["results"]["systems"])  # best F1 first
    chosen = [name for name in (chosen or names[:CHART_SYSTEMS]) if name in names]
    rows = table_rows(board, kind, open_weights, video_input)
    return (
        gr.Dataframe({"headers": COLUMNS, "data": rows}, headers=COLUMNS, column_widths=[WIDTHS.get(c, 80) for c in
                     COLUMNS], datatype=["number" if column in NUMBERS else "str" for column in COLUMNS]),
        gr.Textbox("\n".join(board["problems"]), visible=bool(board["problems"])),
        pairwise_html(board, metric),
        gr.CheckboxGroup(choices=names, value=chosen),
        category_chart(board, chosen),
        head,
    )


def send(request: gr.Request, upload, control, seen_head, metric, chosen, kind_filter, weights_filter, video_filter,
         *values):
    fields = dict(zip(FIELDS, values))
    try:
        if upload is None:
            raise Refused("predictions file: choose one")
        check_metadata(fields)  # a mistyped field costs no submission of the day
        limit.take(request.username or getattr(request.client, "host", None) or "unknown")
        control = control and (Path(control), Path(control).name)
        submit(split, CONFIG["settings"], store, Path(upload), fields, Path(upload).name, seen_head, control)
        message = f"Stored: {' '.join(str(fields['system']).split())} is on the board."
    except (FiberbenchError, Refused) as refusal:
        message = f"Refused: {describe(refusal)}"
    except OSError as error:  # the Hub's HTTP errors among them: the commit did not happen
        message = f"Not stored: {store.describe()} could not be written ({describe(error)}); submit again later"
    return (message, *refresh(metric, chosen, kind_filter, weights_filter, video_filter))


# Gradio keeps an upload at a path made of its content's digest and its name, so the same file sent twice at once is
# one path: deleting it after one submission would take it from under the other. Gradio's own sweep deletes old ones.
with gr.Blocks(title=CONFIG["title"], delete_cache=(UPLOADS_KEPT_S, UPLOADS_KEPT_S)) as demo:
    gr.Markdown(introduction(CONFIG["title"], split.dataset, CONFIG["settings"]))
    head = gr.State(None)
    with gr.Tab("Leaderboard"):
        with gr.Row():
            kind_filter = gr.Dropdown([ALL, *KINDS], value=ALL, label="kind", elem_id="kind_filter")
            weights_filter = gr.Dropdown([ALL, "yes", "no"], value=ALL, label="open weights", elem_id="weights_filter")
            video_filter = gr.Dropdown([ALL, *VIDEO_INPUTS], value=ALL, label="video input", elem_id="video_filter")
        table = gr.Dataframe(interactive=False, elem_id="board", wrap=True, show_search="none", latex_delimiters=[])
        problems = gr.Textbox(label="stored submissions not shown", visible=False, interactive=False,
                              elem_id="problems")
        gr.Markdown(RANKS_TEXT)
        gr.Markdown(f"### {REPORTED.capitalize()} (Table 3): not scored here, no interval, never ranked\n\n{F1_TEXT}")
        gr.Dataframe(value=paper_rows(CONFIG["split"]), headers=["method", "EM", "F1", "which F1", "source"],
                     datatype=["str", "number", "number", "str", "str"], interactive=False, elem_id="paper")
        gr.Markdown(PAIRWISE_TEXT)
        metric = gr.Radio([(shown, key) for key, shown in METRIC_NAMES.items()], value="f1", label="pairwise metric")
        pairwise = gr.HTML(elem_id="pairwise")
        chosen = gr.CheckboxGroup(label="systems in the chart (the baselines are always shown)", elem_id="chosen")
        chart = gr.Plot(label="F1 and EM by category", elem_id="chart")
    with gr.Tab("Submit"):
        gr.Markdown(f"Your predictions are scored here by the code of `fiberbench evaluate`. {BOUNDS} Texts in "
                    f"letters, digits, spaces and {SIGNS} only. At most {CONFIG['submissions_per_day']} submissions a "
                    "day.")
        with gr.Row():
            upload = gr.File(label="predictions file", file_types=list(FORMATS), elem_id="upload")
            control = gr.File(label="blind control (optional)", file_types=list(FORMATS), elem_id="control")
        with gr.Row():  # the optional fields start empty: nothing is claimed of a system that said nothing
            widgets = [gr.Dropdown(["", *choices], value="", label=label, info=hint, elem_id=field) if choices
                       else gr.Textbox(label=label, info=hint, elem_id=field)
                       for field, (label, hint, choices) in FIELDS.items()]
        button = gr.Button("Submit", elem_id="submit")
        status = gr.Textbox(label="submission", interactive=False, elem_id="status")
    outputs = [table, problems, pairwise, chosen, chart, head]
    shown_by = [metric, chosen, kind_filter, weights_filter, video_filter]
    demo.load(refresh, inputs=shown_by, outputs=outputs, api_name="board")
    for changed in (metric, kind_filter, weights_filter, video_filter):
        changed.change(refresh, inputs=shown_by, outputs=outputs)
    chosen.input(refresh, inputs=shown_by, outputs=outputs)
    button.click(send, inputs=[upload, control, head, *shown_by, *widgets], outputs=[status, *outputs],
                 api_name="submit", concurrency_limit=4)

if __name__ == "__main__":
    demo.launch(max_file_size=MAX_FILE_BYTES)  # larger uploads are refused by Gradio before they land
