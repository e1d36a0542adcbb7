"""The FIBER leaderboard Space: the board of the stored results, and a Submit tab that scores on the server.

leaderboard.json, beside this file, says where the results are and which split they score. The split's answers are
loaded here and never sent to the browser: the page gets scores only. The board is updated once per revision of the
store, when a page load or a submission finds the store moved: only what is new is scored and compared.
"""

import json
import threading
from pathlib import Path

import gradio as gr

from fiberbench.errors import FiberbenchError, describe
from fiberbench.metric.evaluate.predictions import load_split
from src.display import (ALL, COLUMNS, F1_TEXT, NUMBERS, PAIRWISE_TEXT, RANKS_TEXT, REPORTED, WIDTHS, category_chart,
                         columns, introduction, pairwise_html, paper_rows, sorted_rows, table_rows)
from src.metadata import KINDS, RUNS, VIDEO_INPUTS, Refused, check_metadata
from src.populate import Board, open_store
from src.submission import BOUNDS, MAX_FILE_BYTES, DailyLimit, submit

HERE = Path(__file__).resolve().parent
CONFIG = json.loads((HERE / "leaderboard.json").read_text(encoding="utf-8"))
CHART_SYSTEMS = 3  # the by-category chart shows the best three systems until others are chosen
UPLOADS_KEPT_S = 3600  # an uploaded predictions file is deleted between one and two hours after it came

split = load_split(CONFIG["dataset_name"], CONFIG["dataset_config_name"], CONFIG["split"])
store = open_store(CONFIG["results_repo"], HERE / CONFIG["results_dir"] if CONFIG["results_dir"] else None)
board_of_store, limit = Board(split, CONFIG["settings"]), DailyLimit(CONFIG["submissions_per_day"])
_computing, _board = threading.Lock(), {}


def current_board() -> tuple[str, dict]:
    """(revision, board) at the store's head now, updated once per revision (one update at a time)."""
    head = store.head(CONFIG["split"])
    with _computing:
        if _board.get("head") != head:
            _board.update(head=head, board=board_of_store.update(*store.read(CONFIG["split"], head)))
        return head, _board["board"]


def refresh(sort_by: str, metric: str, chosen: list[str] | None, kind: str, open_weights: str, video_input: str):
    try:
        head, board = current_board()
    except (FiberbenchError, OSError, Refused) as error:
        raise gr.Error(describe(error)) from None
    shown, systems = columns(board), board["results"]["systems"]
    names = sorted(systems, key=lambda name: -systems[name]["f1"])
    chosen = [name for name in (chosen or names[:CHART_SYSTEMS]) if name in names]
    rows = sorted_rows(table_rows(board, kind, open_weights, video_input), shown, sort_by)
    return (
        gr.Dataframe({"headers": shown, "data": rows}, headers=shown, column_widths=[WIDTHS.get(c, 80) for c in shown],
                     datatype=["number" if column in NUMBERS else "str" for column in shown]),
        gr.Textbox("\n".join(board["problems"]), visible=bool(board["problems"])),
        pairwise_html(board, "f1" if metric == "F1" else "exact_match"),
        gr.CheckboxGroup(choices=names, value=chosen),
        category_chart(board, chosen),
        head,
    )


def send(upload, system, link, kind, parameters, open_weights, video_input, frames, fps, run_with, task_version,
         answer_reading, seen_head, sort_by, metric, chosen, kind_filter, weights_filter, video_filter,
         request: gr.Request):
    fields = {"system": system, "link": link, "kind": kind, "parameters": parameters, "open_weights": open_weights,
              "video_input": video_input, "frames": frames, "fps": fps, "run_with": run_with,
              "task_version": task_version, "answer_reading": answer_reading}
    try:
        if upload is None:
            raise Refused("predictions file: choose one")
        check_metadata(fields)  # a mistyped field costs no submission of the day
        limit.take(request.username or getattr(request.client, "host", None) or "unknown")
        submit(split, CONFIG["settings"], store, Path(upload), fields, Path(upload).name, parent=seen_head)
        message = f"Stored: {' '.join(str(system).split())} is on the board."
    except (FiberbenchError, Refused) as refusal:
        message = f"Refused: {describe(refusal)}"
    except OSError as error:  # the Hub's HTTP errors among them: the commit did not happen
        message = f"Not stored: {store.describe()} could not be written ({describe(error)}); submit again later"
    return (message, *refresh(sort_by, metric, chosen, kind_filter, weights_filter, video_filter))


# Gradio keeps an upload at a path made of its content's digest and its name, so the same file sent twice at once is
# one path: deleting it after one submission would take it from under the other. Gradio's own sweep deletes old ones.
with gr.Blocks(title=CONFIG["title"], delete_cache=(UPLOADS_KEPT_S, UPLOADS_KEPT_S)) as demo:
    gr.Markdown(introduction(CONFIG["title"], split.dataset, CONFIG["settings"]))
    head = gr.State(None)
    with gr.Tab("Leaderboard"):
        with gr.Row():
            sort_by = gr.Dropdown([c for c in COLUMNS if c != "rank interval"], value="F1", label="sort by",
                                  elem_id="sort")
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
        metric = gr.Radio(["F1", "EM"], value="F1", label="pairwise metric")
        pairwise = gr.HTML(elem_id="pairwise")
        chosen = gr.CheckboxGroup(label="systems in the chart (the baselines are always shown)", elem_id="chosen")
        chart = gr.Plot(label="F1 and EM by category", elem_id="chart")
    with gr.Tab("Submit"):
        gr.Markdown(f"Your predictions are scored here by the code of `fiberbench evaluate`. {BOUNDS} A system name of "
                    "at most 80 characters, in one script, unlike any name on the board; texts in letters, digits, "
                    f"spaces and .,:;+-_()/#@%&=?! only. At most {CONFIG['submissions_per_day']} submissions a day.")
        upload = gr.File(label="predictions file", file_types=[".jsonl", ".json", ".csv"], elem_id="upload")
        with gr.Row():
            system = gr.Textbox(label="system name", elem_id="system")
            link = gr.Textbox(label="model link (https://...; optional)", elem_id="link")
        with gr.Row():
            kind = gr.Dropdown(list(KINDS), value="video", label="kind", elem_id="kind")
            parameters = gr.Textbox(label="parameters (e.g. 7B, 220M; optional)", elem_id="parameters")
            open_weights = gr.Dropdown(["", "yes", "no"], value="", label="open weights", elem_id="open_weights")
        with gr.Row():
            video_input = gr.Dropdown(["", *VIDEO_INPUTS], value="", label="video input", elem_id="video_input")
            frames = gr.Textbox(label="frames per clip (optional)", elem_id="frames")
            fps = gr.Textbox(label="frames per second (with video input fps)", elem_id="fps")
        with gr.Row():
            run_with = gr.Dropdown(list(RUNS), value="other", label="run with", elem_id="run_with")
            task_version = gr.Textbox(label="lmms-eval task version (with run with lmms-eval)", elem_id="task_version")
            answer_reading = gr.Textbox(label="answer reading (how the answer is taken from the reply; optional)")
        button = gr.Button("Submit", elem_id="submit")
        status = gr.Textbox(label="submission", interactive=False, elem_id="status")
    outputs = [table, problems, pairwise, chosen, chart, head]
    shown_by = [sort_by, metric, chosen, kind_filter, weights_filter, video_filter]
    demo.load(refresh, inputs=shown_by, outputs=outputs, api_name="board")
    for control in (sort_by, metric, kind_filter, weights_filter, video_filter):
        control.change(refresh, inputs=shown_by, outputs=outputs)
    chosen.input(refresh, inputs=shown_by, outputs=outputs)
    fields = [upload, system, link, kind, parameters, open_weights, video_input, frames, fps, run_with, task_version,
              answer_reading]
    button.click(send, inputs=[*fields, head, *shown_by], outputs=[status, *outputs], api_name="submit",
                 concurrency_limit=4)

if __name__ == "__main__":
    demo.launch(max_file_size=MAX_FILE_BYTES)  # larger uploads are refused by Gradio before they land
