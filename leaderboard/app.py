"""The leaderboard Space's Gradio page: the board of the stored results, and the Submit tab.

The Space's own app.py (written by `fiberbench leaderboard`) calls `launch` with its folder, whose
leaderboard.json says where the results are and which split they score. The split's answers are
loaded here, on the server, and never sent to the browser: the page receives scores only. The
board is computed once per revision of the store and computed again when the store moves (a
page load or a submission notices it).
"""

import json
import threading
from pathlib import Path

from fiberbench.leaderboard.board import Benchmark, compute_board, load_benchmark
from fiberbench.leaderboard.display import (
    COLUMN_WIDTHS,
    COLUMNS,
    DATATYPES,
    REPORTED,
    category_chart,
    pairwise_html,
    paper_rows,
    sorted_rows,
    table_rows,
)
from fiberbench.leaderboard.store import open_store, read_entries
from fiberbench.leaderboard.submission import BOUNDS, KINDS, MAX_FILE_BYTES, Refused, check_metadata, submit


CONFIG_FILE = "leaderboard.json"
CHART_SYSTEMS = 3  # the by-category chart shows the best three systems until others are chosen
UPLOADS_KEPT_S = 3600  # an uploaded predictions file is deleted between one and two hours after it came


class LiveBoard:
    """The board at the store's latest revision, computed once per revision (one computation at a time)."""

    def __init__(self, benchmark: Benchmark, store):
        self.benchmark, self.store = benchmark, store
        self.split = benchmark.dataset["split"]
        self._lock = threading.Lock()
        self._head, self._board = None, None

    def current(self) -> tuple[str, dict]:
        """(revision, board) at the store's head now."""
        head = self.store.head(self.split)
        with self._lock:
            if head != self._head:
                entries = read_entries(self.store.snapshot(self.split, head), self.split)
                self._head, self._board = head, compute_board(self.benchmark, entries)
            return self._head, self._board


def introduction(config: dict, benchmark: Benchmark) -> str:
    dataset, settings = benchmark.dataset, benchmark.settings
    level = f"{100 * settings['confidence_level']:g}%"
    synthetic = (
        "\n\n**SYNTHETIC data** (the bundled sample): these numbers say nothing about FIBER."
        if dataset["synthetic"]
        else ""
    )
    return (
        f"# {config['title']}\n\nThe {dataset['split']} split of {dataset['name']} ({dataset['num_blanks']:,} blanks), "
        f"scored by `fiberbench evaluate`: EM and F1 in percent, each with its {level} confidence interval (percentile "
        f"bootstrap over the blanks, {settings['num_bootstrap']:,} resamples, seed {settings['seed']}).{synthetic}"
    )


RANKS_TEXT = (
    "**Rank** orders the systems by F1. **Rank interval**: the ranks a system takes across the same paired bootstrap "
    "resamples of the blanks (every system scored on the same resampled blanks); two systems whose rank intervals "
    "overlap may be in either order on other blanks like these. Baselines and the paper's rows are not ranked."
)
PAIRWISE_TEXT = (
    "**Pairwise comparisons**: row - column on the same blanks, with the two-sided p-value of approximate "
    "randomization (as `fiberbench evaluate` gives it) and that p-value after **Holm's correction** for the number "
    "of pairs compared (which keeps the chance of any false difference among them at 5%). **Bold**: Holm-corrected "
    "p below 0.05, a difference unlikely to be luck of the blanks."
)


def build_demo(folder: Path):
    """The Gradio Blocks of the Space in `folder` (its leaderboard.json), the board computed at the store's head."""
    import gradio as gr

    config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    benchmark = load_benchmark(config["dataset_name"], config["dataset_config_name"], config["split"], config["settings"])
    results_dir = folder / config["results_dir"] if config["results_dir"] else None
    live = LiveBoard(benchmark, open_store(config["results_repo"], results_dir))

    def shown(board: dict, sort_by: str, metric: str, chosen: list[str] | None):
        names = [row[2] for row in table_rows(board) if row[0] != "baseline"]
        chosen = [name for name in (chosen or names[:CHART_SYSTEMS]) if name in names]
        return (
            sorted_rows(table_rows(board), sort_by),
            pairwise_html(board, "f1" if metric == "F1" else "exact_match"),
            gr.CheckboxGroup(choices=names, value=chosen),
            category_chart(board, chosen),
        )

    def refresh(sort_by: str, metric: str, chosen: list[str] | None):
        head, board = live.current()
        return (*shown(board, sort_by, metric, chosen), head)

    def send(upload, system, link, kind, video_input, frames, answer_reading, seen_head, sort_by, metric, chosen):
        try:
            if upload is None:
                raise Refused("predictions file: choose one")
            metadata = check_metadata(system, link, kind, video_input, frames, answer_reading)
            path = Path(upload)
            submit(live.benchmark, live.store, path, metadata, path.name, parent=seen_head)
            message = f"Stored: {metadata['system']} is on the board."
        except Refused as refusal:
            message = f"Refused: {refusal}"
        except OSError as error:  # the Hub's HTTP errors among them: the commit did not happen
            problem = (str(error).splitlines() or [type(error).__name__])[0]
            message = f"Not stored: {live.store.describe()} could not be written ({problem}); submit again later"
        return (message, *refresh(sort_by, metric, chosen))

    # Gradio keeps an upload at a path made of its content's digest and its name, so the same file sent twice
    # at once is one path: deleting it after one submission would take it from under the other. Gradio's own
    # sweep deletes uploads once they are old instead.
    with gr.Blocks(title=config["title"], delete_cache=(UPLOADS_KEPT_S, UPLOADS_KEPT_S)) as demo:
        gr.Markdown(introduction(config, benchmark))
        head = gr.State(None)
        with gr.Tab("Leaderboard"):
            sort_by = gr.Dropdown([column for column in COLUMNS if column != "rank interval"], value="F1",
                                  label="sort by", elem_id="sort")
            table = gr.Dataframe(
                headers=COLUMNS,
                datatype=DATATYPES,
                column_widths=COLUMN_WIDTHS,
                interactive=False,
                elem_id="board",
                wrap=True,
                show_search="none",
            )
            gr.Markdown(RANKS_TEXT)
            gr.Markdown(f"### {REPORTED.capitalize()} (Table 3): not scored here, no interval, never ranked")
            gr.Dataframe(
                value=paper_rows(config["split"]),
                headers=["method", "EM", "F1", "source"],
                datatype=["str", "number", "number", "str"],
                interactive=False,
                elem_id="paper",
            )
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
        outputs = [table, pairwise, chosen, chart, head]
        shown_by = [sort_by, metric, chosen]
        demo.load(refresh, inputs=shown_by, outputs=outputs, api_name="board")
        for control in (sort_by, metric):
            control.change(refresh, inputs=shown_by, outputs=outputs)
        chosen.input(refresh, inputs=shown_by, outputs=outputs)
        button.click(
            send,
            inputs=[upload, system, link, kind, video_input, frames, answer_reading, head, *shown_by],
            outputs=[status, *outputs],
            api_name="submit",
            concurrency_limit=4,
        )
    return demo


def launch(folder: Path) -> None:
    """Serve the Space in `folder`; uploads above the submission bound are refused by Gradio before they land."""
    build_demo(folder).launch(max_file_size=MAX_FILE_BYTES)
