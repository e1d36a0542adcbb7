"""The annotation page in a real headless Chromium: a worker's answers, typed, checked and submitted as Mechanical
Turk takes them (a local stand-in serves the task from a row of `fiberbench hit-inputs` and receives the submission;
test_answers reads that layout). The browser reaches no network: YouTube's player is a placeholder, or a stand-in of
its API where the player itself is tested."""

import csv
import json
import re
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fiberbench.cli import main
from fiberbench.data.annotation import PAGE_PATH, preview_url
from fiberbench.metric import normalize_answer

from .conftest import blanked_record

pytest.importorskip("websockets", reason="the browser tests need the `test` extra's websockets")
# chromium.py is a helper module of the tests folder; pytest's importlib mode does not put test folders on sys.path.
sys.path.insert(0, str(Path(__file__).parents[1]))
from chromium import CHROMIUM, SKIP_REASON, Chromium  # noqa: E402

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)

# Seven clips: a task of five and the remainder of two. The third caption holds quotes and an ampersand.
BLANKED = [
    blanked_record("clipAAAAAA1", "A man is cutting a cake in the kitchen.", "a cake"),
    blanked_record("clipAAAAAA2", "A dog runs along the beach.", "the beach"),
    blanked_record("clipAAAAAA3", 'A girl says "hello" & waves at her mother.', "her mother"),
    blanked_record("clipAAAAAA4", "A young man plays the guitar on a stage.", "A young man"),
    blanked_record("clipAAAAAA5", "A woman feeds some chickens in the backyard.", "some chickens"),
    blanked_record("clipAAAAAA6", "Two boys kick a ball in a park.", "a ball"),
    blanked_record("clipAAAAAA7", "A chef slices an onion on a board.", "an onion"),
]


@pytest.fixture
def tasks(tmp_path):
    """The task rows of BLANKED, made by `fiberbench hit-inputs`."""
    (tmp_path / "val.json").write_text(json.dumps(BLANKED))
    assert main(["hit-inputs", str(tmp_path / "val.json"), "--output_file", str(tmp_path / "hits.csv")]) == 0
    with (tmp_path / "hits.csv").open(newline="") as file:
        return list(csv.DictReader(file))


class MechanicalTurk(BaseHTTPRequestHandler):
    """A stand-in of Mechanical Turk: serves the page as a task (placeholders replaced by the server's `task` values)
    and keeps what is submitted to it."""

    def do_GET(self):
        # A placeholder without a value in the row fails the request, as Mechanical Turk refuses such a template.
        self._answer(re.sub(r"\$\{(\w+)\}", lambda match: self.server.task[match[1]], PAGE_PATH.read_text()))

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        if self.path == "/mturk/externalSubmit":
            self.server.submissions.append(urllib.parse.parse_qs(body, keep_blank_values=True))
        self._answer("<p>Submitted</p>")

    def _answer(self, body):
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def mturk():
    server = ThreadingHTTPServer(("127.0.0.1", 0), MechanicalTurk)
    server.task, server.submissions, server.url = {}, [], f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with Chromium(tmp_path_factory.mktemp("chromium")) as chromium:
        yield chromium


def open_page(browser, url):
    browser.open(url)
    browser.wait_for("document.body.dataset.ready === 'true'")


def text_of(browser, selector):
    return browser.evaluate(f"document.querySelector({json.dumps(selector)}).textContent")


def answers_shown(browser, clip):
    return browser.evaluate(f"[...document.querySelectorAll('#clip-{clip} .answer-text')].map(e => e.textContent)")


def add_answers(browser, clip, *answers):
    browser.click(f"#clip-{clip} .answer-input")
    for answer in answers:
        browser.type(answer)
        browser.press_enter()


def test_a_worker_answers_a_task_and_mechanical_turk_receives_it(tasks, mturk, browser):
    mturk.task = tasks[0]
    query = urllib.parse.urlencode({"assignmentId": "3ASSIGN", "hitId": "3HIT", "turkSubmitTo": mturk.url,
                                    "workerId": "WORKER1"})
    open_page(browser, f"{mturk.url}/task?{query}")

    assert browser.evaluate("document.querySelectorAll('section.clip:not([hidden])').length") == 5
    assert text_of(browser, "#clip-3 .question") == 'A girl says "hello" & waves at _____.'
    assert text_of(browser, "#clip-1 .clip-title") == "Clip 1 of 5 (10 seconds)"
    # No network: each player is a placeholder naming its clip.
    browser.wait_for("document.querySelector('#clip-1 .player-message').textContent.includes('could not be loaded')")
    assert "clipAAAAAA1, seconds 10 to 20" in text_of(browser, "#clip-1 .player-message")

    add_answers(browser, 1, "a cake", "a pie", "The Cake!")
    # Equal to "a cake" after the metric's normalization: refused on the spot, left in the box to change.
    assert answers_shown(browser, 1) == ["a cake", "a pie"]
    assert "is the same answer as \u201ca cake\u201d" in text_of(browser, "#clip-1 .answer-error")
    assert browser.evaluate("document.querySelector('#clip-1 .answer-input').value") == "The Cake!"
    browser.send("Input.dispatchKeyEvent", {"type": "rawKeyDown", "commands": ["selectAll"]})
    browser.type("bread")
    browser.press_enter()
    browser.click("#clip-1 .answers li:nth-child(2) .remove-answer")  # "a pie" removed
    assert answers_shown(browser, 1) == ["a cake", "bread"]

    browser.click("#clip-2 .unavailable-box")
    add_answers(browser, 3, "her mother", "a woman")
    add_answers(browser, 4, "A young man", "a guitarist")
    browser.type("a musician")  # typed, Enter not pressed: submitting adds it
    add_answers(browser, 5, "some chickens")
    browser.click("#comments")
    browser.type("Clip 2 did not play.")

    browser.click("#submit-button")  # clip 5 has one answer: nothing is sent
    assert text_of(browser, "#submit-error") == "Please finish clip 5 before submitting."
    assert "at least 2 answers" in text_of(browser, "#clip-5 .answer-error")
    add_answers(browser, 5, "hens")

    browser.click("#submit-button")
    browser.wait_until(lambda: mturk.submissions, "the page posted nothing to turkSubmitTo")
    assert browser.exceptions == []
    (submission,) = mturk.submissions
    assert submission["assignmentId"] == ["3ASSIGN"]
    (task_answers,) = submission["taskAnswers"]
    assert json.loads(task_answers) == [{
        "answer-1-1": "a cake", "answer-1-2": "bread", "answer-2-1": "unavailable video", "answer-3-1": "her mother",
        "answer-3-2": "a woman", "answer-4-1": "A young man", "answer-4-2": "a guitarist", "answer-4-3": "a musician",
        "answer-5-1": "some chickens", "answer-5-2": "hens", "comments": "Clip 2 did not play.",
    }]


def test_opened_from_disk_with_a_task_in_its_query_string(tasks, browser):
    open_page(browser, preview_url({**tasks[0], "assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE"}))  # a preview
    assert "Accept the task" in text_of(browser, "#task-status")
    assert browser.evaluate("document.getElementById('submit-button').disabled")
    open_page(browser, PAGE_PATH.as_uri())  # no inputs
    assert "no task inputs" in text_of(browser, "#task-status")
    assert browser.evaluate("document.getElementById('submit-button').disabled")
    open_page(browser, preview_url(tasks[1]))  # the remainder: two clips, three empty slots
    assert browser.evaluate("[...document.querySelectorAll('section.clip')].map(s => s.hidden)") == [False] * 2 + [True] * 3
    assert "Local preview" in text_of(browser, "#task-status")
    assert text_of(browser, "#clip-2 .question") == "A chef slices _____ on a board."
    add_answers(browser, 1, "a football", "the ball")
    add_answers(browser, 2, "an onion", "a vegetable")
    browser.click("#submit-button")
    browser.wait_for("!document.getElementById('submission').hidden")
    assert json.loads(text_of(browser, "#submission-json")) == [{"answer-1-1": "a football", "answer-1-2": "the ball",
                                                                  "answer-2-1": "an onion", "answer-2-2": "a vegetable",
                                                                  "comments": ""}]
    assert browser.exceptions == []


# A stand-in for YouTube's IFrame player API: records each player and calls the page back as the API does.
FAKE_PLAYER_API = """window.players = []; window.YT = {PlayerState: {ENDED: 0, PLAYING: 1}, Player: function (e, options) {
  this.options = options; this.cued = []; this.cueVideoById = what => this.cued.push(what); window.players.push(this);
  options.events.onReady({target: this});
}}; window.onYouTubeIframeAPIReady();"""


def test_one_player_per_clip_held_to_its_start_and_end(tmp_path, tasks):
    with Chromium(tmp_path / "chromium") as browser:
        browser.intercept("https://www.youtube.com/iframe_api*", FAKE_PLAYER_API, "text/javascript")
        open_page(browser, preview_url(tasks[0]))
        browser.wait_for("window.players && window.players.length === 5")
        options = "p.options.videoId, p.options.playerVars.start, p.options.playerVars.end"
        players = browser.evaluate(f"players.map(p => [{options}])")
        assert players == [[record["video_id"], 10, 20] for record in BLANKED[:5]]
        assert browser.evaluate("[...document.querySelectorAll('.player-message')].every(m => m.hidden)")
        # At the clip's end the player is cued again at the clip's start, not the video's.
        browser.evaluate("players[2].options.events.onStateChange({data: YT.PlayerState.ENDED})")
        assert browser.evaluate("players[2].cued") == [{"videoId": "clipAAAAAA3", "startSeconds": 10, "endSeconds": 20}]
        browser.evaluate("players[1].options.events.onError({data: 150})")
        assert "Tick \u201cThe video does not play\u201d" in text_of(browser, "#clip-2 .player-message")
        assert browser.exceptions == []


# Strings where Python and JavaScript could part ways: Unicode word characters next to an article,
# white space Python splits on (\x1c-\x1f, \x85) and one it keeps (\ufeff), case mappings that grow.
EDGE_CASES = [
    "  The Water-filled   balloons!", "a-team", "éa man", "a_b the_c", "ça a", "\x1cthe\x85dog\x1f", "\ufeffthe\ufeffcat",
    "İstanbul THE ΣΑΣ", "an² ½an a١", "3a a3 the", "\u2028a\u3000an\u00a0the\tbig\u200bdog", "cafe\u0301 caf\u00e9",
    "\uff34\uff48\uff45 \uff44\uff4f\uff47\uff01", "do\u00adg \ufb01sh",
]


def test_the_page_normalizes_answers_as_the_metric_does(browser):
    open_page(browser, PAGE_PATH.as_uri())
    assert browser.evaluate(f"{json.dumps(EDGE_CASES)}.map(normalizeAnswer)") == list(map(normalize_answer, EDGE_CASES))
