"""FIBER's crowd task (§3.2, Figure 2): the annotation page (`annotation.html`, a Mechanical Turk template with
`${question1}`-style placeholders, also opened in a browser with the inputs in its query string) and its layout.

A task's inputs are, for clip `i` from 1, `video{i}_id`, `video{i}_start_time`, `video{i}_end_time`, `question{i}`
(the masked caption) and `label{i}`. A worker's answers come back as one JSON object whose key `answer-{i}-{rank}`
holds the answer of rank `rank` (from 1, most natural first) to clip `i` (on Mechanical Turk, the results' column
`Answer.taskAnswers`, in a JSON list); a clip that would not play is answered "unavailable video".
"""

import html
import re
import urllib.parse
from pathlib import Path

PAGE_PATH = Path(__file__).resolve().parent / "annotation.html"
CLIPS_PER_TASK = 5  # as in the paper
# `answer-{clip}-{rank}` holds an answer; `answer-input-{clip}` is what the release's page still had in a clip's
# text box at submission, which the release counted as that clip's last answer.
ANSWER_KEY = re.compile(r"answer-(\d+)-(\d+)")
PENDING_ANSWER_KEY = re.compile(r"answer-input-(\d+)")
# The first characters that make a spreadsheet read a cell as a formula (see `task_input_cell`).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# The clip slots of the page lie between these two lines; `annotation_page` rewrites them.
_SLOTS_START, _SLOTS_END = "<!-- clip slots: one per clip of a task -->\n", "<!-- end of clip slots -->\n"


def input_columns(clip: int) -> dict[str, str]:
    """Release field -> task input column of clip number `clip` (from 1)."""
    return {"video_id": f"video{clip}_id", "video_start_time": f"video{clip}_start_time",
            "video_end_time": f"video{clip}_end_time", "masked_caption": f"question{clip}", "label": f"label{clip}"}


def task_input_cell(value: str) -> str:
    """A task input as its CSV cell: HTML-escaped (Mechanical Turk pastes each cell into the page as it is), and never a
    spreadsheet formula (OWASP, "CSV Injection"): a first `=`, `+`, `-`, `@`, tab or carriage return is written as its
    character reference (`=` as `&#61;`), which the page shows as the character itself."""
    cell = html.escape(value)
    return f"&#{ord(cell[0])};{cell[1:]}" if cell.startswith(FORMULA_STARTS) else cell


def task_input_value(cell: str) -> str:
    """The task input that a cell of `task_input_cell` holds (Mechanical Turk's results repeat it as `Input.*`)."""
    return html.unescape(cell)


def is_unavailable_video(answer: str) -> bool:
    """Whether an answer says the clip did not play: as the release, any answer holding both words."""
    return "unavailable" in answer.lower() and "video" in answer.lower()


def annotation_page(clips_per_task: int = CLIPS_PER_TASK) -> str:
    """The annotation page's HTML with one slot per clip of a task (the shipped page has `CLIPS_PER_TASK`)."""
    page = PAGE_PATH.read_text(encoding="utf-8")
    start = page.index(_SLOTS_START) + len(_SLOTS_START)
    end = page.rindex("\n", 0, page.index(_SLOTS_END, start)) + 1  # keep the indentation of the closing line
    attributes = {"video-id": "video_id", "start-time": "video_start_time", "end-time": "video_end_time",
                  "question": "masked_caption"}
    slots = [f'    <section class="clip" id="clip-{clip}" data-clip="{clip}" '
             + " ".join(f'data-{name}="${{{input_columns(clip)[field]}}}"' for name, field in attributes.items())
             + "></section>\n" for clip in range(1, clips_per_task + 1)]
    return page[:start] + "".join(slots) + page[end:]


def preview_url(task_inputs: dict[str, str], page: Path = PAGE_PATH) -> str:
    """A `file://` URL that opens `page` in a browser on one task: a row of `fiberbench hit-inputs`'s CSV."""
    return f"{page.resolve().as_uri()}?{urllib.parse.urlencode(task_inputs)}"
