"""The leaderboard Space for real: built by `fiberbench leaderboard` from a results repo on the local Hub, pushed,
pulled back, started with the real Gradio, and used in headless Chromium. The tests share one Space (per process), in
any order: what they submit scores below the four systems (`worst_file`), whose rank intervals stay as they are."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import FLAGS

# A Space process, Chromium and the local Hub: minutes. One worker starts the Space (pyproject.toml's --dist loadgroup).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("leaderboard_space")]

# The Space runs in a process of its own: gradio is needed installed here, not imported (a second of CPU).
if importlib.util.find_spec("gradio") is None:
    pytest.skip("the Space needs the `test` extra's gradio", allow_module_level=True)
from gradio_client import Client, handle_file  # noqa: E402
from huggingface_hub import snapshot_download  # noqa: E402

# Helper modules of the tests folder, which pytest's importlib mode does not put on sys.path.
sys.path.insert(0, str(Path(__file__).parents[1]))
sys.path.insert(0, str(Path(__file__).parents[1] / "hub"))
from chromium import CHROMIUM, SKIP_REASON, Chromium  # noqa: E402
from hub_server import LocalHub  # noqa: E402

from ..metric.test_space import free_port, serving  # noqa: E402

RESULTS_REPO, SPACE_REPO = "fiber-org/fiber-results", "fiber-org/fiber-leaderboard"
BUILT_FILES = ["README.md", "app.py", "leaderboard.json", "requirements.txt", "src/__init__.py", "src/display.py",
               "src/metadata.py", "src/populate.py", "src/submission.py"]
# How each system was run, as --add takes it: "best" is the maintainers' own run.
METADATA = {"best": ["--verified", "--open_weights", "yes", "--parameters", "7B"], "near": [],
            "tied A": ["--open_weights", "no"], "tied B": []}


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    with LocalHub(storage=tmp_path_factory.mktemp("hub_storage")) as hub:
        env = {**os.environ, **hub.client_env(tmp_path_factory.mktemp("hf_home"))}
        env.pop("HF_HUB_OFFLINE", None)
        yield hub, env
    assert not hub.unhandled, f"Clients needed routes the local Hub does not serve: {hub.unhandled}"


def fiberbench(env: dict, *args) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "fiberbench.cli", *map(str, args)], env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-5000:]
    return result


@pytest.fixture(scope="module")
def pulled_space(hub, predictions_files, tmp_path_factory):
    """The four systems added to the results repo: three in one call, then the fourth to that board with the Space
    pushed; the Space pulled back."""
    local_hub, env = hub
    built = tmp_path_factory.mktemp("built") / "space"
    systems = [[*("--add", path, "--name", name, "--kind", "video", "--link", "https://example.org/fiber"),
                *("--video_input", "frames", "--frames", "8"), *METADATA[name]] for name, path in predictions_files.items()]
    for added, push in ((systems[:-1], []), (systems[-1:], ["--push_to_hub", SPACE_REPO])):
        fiberbench(env, "leaderboard", "--results_repo", RESULTS_REPO, *sum(added, []), "--output_dir", built,
                   "--submissions_per_day", "100", *FLAGS, *push)
    pulled = Path(snapshot_download(SPACE_REPO, repo_type="space", endpoint=local_hub.url, token=env["HF_TOKEN"],
                                    local_dir=tmp_path_factory.mktemp("pulled") / "space"))
    pushed = sorted(path.relative_to(pulled).as_posix() for path in pulled.rglob("*")
                    if path.is_file() and not path.relative_to(pulled).as_posix().startswith("."))
    assert pushed == BUILT_FILES
    for name in BUILT_FILES:
        assert (pulled / name).read_bytes() == (built / name).read_bytes()
    return pulled


@pytest.fixture(scope="module")
def space_url(hub, pulled_space, tmp_path_factory):
    """`python app.py` in the pulled Space folder, as the Hub runs it, on a free local port."""
    _, env = hub
    # Uploads in a folder of its own, as each Space on the Hub has its own disk (not Gradio's default folder, which
    # every Gradio app of the machine shares).
    env = {**env, "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(free_port()),
           "GRADIO_ANALYTICS_ENABLED": "False", "GRADIO_TEMP_DIR": str(tmp_path_factory.mktemp("gradio_uploads"))}
    with serving(pulled_space, env, tmp_path_factory.mktemp("space") / "app.log", timeout=180) as url:
        yield url


def board(space_url, kind: str = "all", open_weights: str = "all", video_input: str = "all"):
    """The board as the page's API gives it: (table, the line of each stored submission not shown)."""
    answer = Client(space_url, verbose=False).predict("f1", [], kind, open_weights, video_input, api_name="/board")
    return answer[0]["value"], answer[1]["value"]  # updates of the table (with its columns) and of the note


def board_rows(space_url, **filters) -> list[list]:
    return board(space_url, **filters)[0]["data"]


def send_through_api(space_url, path: Path, name: str, frames="") -> str:
    """Submit `path` as system `name` as a script would, through the Space's API: the line it answers."""
    fields = [name, "", "", "", "", "", frames, "", "", "", ""]
    return Client(space_url, verbose=False).predict(handle_file(str(path)), None, "f1", [], "all", "all", "all",
                                                    *fields, api_name="/submit")[0]


def test_the_pulled_space_serves_the_board_without_the_answers(space_url, sample_splits):
    import httpx

    table, _ = board(space_url)
    rows, best = table["data"], dict(zip(table["headers"], table["data"][0]))
    assert [row[:3] for row in rows if row[0] != "baseline"][:4] == [
        ["1", "1", "best"], ["2", "2-4", "near"], ["3", "2-4", "tied A"], ["4", "2-4", "tied B"]]
    assert (best["answered"], best["VQA accuracy"], best["F1, release's"]) == (60, 91.6, 100.0)
    assert [row[2] for row in rows if row[0] == "baseline"] == ["human agreement (baseline)",
                                                                'most frequent answer "a guitar" (baseline)']
    # The filters keep the baselines; a system without the field filtered on is not kept.
    assert [row[2] for row in board_rows(space_url, open_weights="yes") if row[0] != "baseline"] == ["best"]
    assert [row[2] for row in board_rows(space_url, open_weights="no") if row[0] != "baseline"] == ["tied A"]
    assert [row[3] for row in rows if row[0] != "baseline"][:3] == ["✓ verified", "self-reported", "self-reported"]
    config = httpx.get(f"{space_url}config", timeout=60).text
    for blank in sample_splits["test"]:  # the split's answers stay on the server
        assert blank["caption"] not in config and blank["caption"] not in str(rows)
        assert all(f'"{answer}"' not in config for annotator in blank["additional_answers"] for answer in annotator)


def open_board(browser, space_url) -> None:
    browser.open(space_url)
    browser.wait_for("document.querySelector('#board') && document.querySelector('#board').innerText.includes('tied B')",
                     120)


TOASTS = "[...document.querySelectorAll('.toast-body')].map(t => t.innerText).join(' ')"


def choose_on_page(browser, path: Path) -> None:
    """Choose `path` in the Submit tab's file input and wait until Gradio has uploaded it (or refused it)."""
    browser.evaluate("[...document.querySelectorAll('button[role=tab]')].find(b => b.innerText.includes('Submit'))"
                     ".click()")
    browser.wait_for("document.querySelector('#upload input[type=file]') !== null")
    browser.choose_file("#upload input[type=file]", path)
    # The file's name shows as soon as it is chosen, beside "Uploading..." until the upload is done, then beside its
    # size (broken over lines: white space left out).
    shown = "document.querySelector('#upload').innerText"
    browser.wait_for(f"({shown}.replace(/\\s/g, '').includes({path.name!r}) && !{shown}.includes('Uploading')) || "
                     f"{TOASTS}.includes('exceed')", 120)


def send_on_page(browser, name: str) -> tuple[str, str]:
    """Submit the chosen file as system `name`: the one line the page answers, and Gradio's own messages (an upload
    it refuses)."""
    browser.click("#system textarea, #system input")
    browser.type(name)
    browser.click("#submit")
    line = browser.wait_for("document.querySelector('#status textarea').value", 300)
    return line, " ".join(browser.evaluate(TOASTS).split())


@pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
def test_the_page_shows_the_board_with_rank_intervals_and_the_paper(space_url, tmp_path):
    from PIL import Image

    with Chromium(tmp_path / "chromium", window_size=(1400, 1800)) as browser:
        open_board(browser, space_url)
        browser.wait_for("document.querySelector('#pairwise table') !== null")
        text = browser.evaluate("document.body.innerText")
        assert "SYNTHETIC" in text and "Holm" in text
        board = browser.evaluate("document.querySelector('#board').innerText")
        # The near-tie: "near" is ahead, but Holm's correction does not tell it from the tied pair.
        assert board.count("2-4") == 3 and "[100.0, 100.0]" in board
        assert board.count("✓ verified") == 1 and board.count("self-reported") >= 3
        paper = browser.evaluate("document.querySelector('#paper').innerText")
        assert "T5 + I3D" in paper and "71.4" in paper and "reported in the paper" in paper
        assert paper.count("the release's model F1 (raw answers, not normalized)") == 7
        matrix = browser.evaluate("document.querySelector('#pairwise').innerHTML")
        # Bold where Holm's p is below 0.05: best against each tied system, not the tied pair nor the near-tie.
        assert matrix.count("<td><b>+61.7 (p &lt;0.0001, Holm &lt;0.0001)</b></td>") == 2
        assert matrix.count("<td>+0.0 (p 1.0000, Holm 1.0000)</td>") == 2 and "<td>+6.7 (p 0.0455, Holm 0." in matrix
        browser.wait_for("document.querySelector('#chart img, #chart svg, #chart canvas') !== null", 120)
        browser.screenshot(tmp_path / "leaderboard.png")
        # The filters: open weights "yes" keeps "best" and the baselines.
        browser.click("#weights_filter input")
        browser.click("li[role=option][aria-label='yes']")  # the open dropdown's option
        browser.wait_for("!document.querySelector('#board').innerText.includes('tied A')")
        assert "best" in browser.evaluate("document.querySelector('#board').innerText")
        assert not browser.exceptions
    image = Image.open(tmp_path / "leaderboard.png").convert("L")
    assert image.size[0] > 1000 and sum(1 for count in image.histogram() if count) > 20
    if os.environ.get("FIBERBENCH_UPDATE_DOCS"):  # the README's picture: FIBERBENCH_UPDATE_DOCS=1 pytest -k page_shows
        (Path(__file__).parents[2] / "docs/leaderboard.png").write_bytes((tmp_path / "leaderboard.png").read_bytes())


@pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
def test_a_file_submitted_through_the_page_is_stored_on_the_head_it_finds_and_ranked(hub, space_url, worst_file,
                                                                                    tmp_path):
    """The page was loaded at one head; another submission lands before this one is sent: both are kept."""
    local_hub, env = hub
    with Chromium(tmp_path / "chromium", window_size=(1400, 1800)) as browser:
        open_board(browser, space_url)
        seen = local_hub.history(RESULTS_REPO, "dataset")[-1].oid
        # Another replica of the Space (or a maintainer) adds a submission meanwhile.
        fiberbench(env, "leaderboard", "--results_repo", RESULTS_REPO, "--add", worst_file, "--name", "meanwhile",
                   "--output_dir", tmp_path / "elsewhere", *FLAGS)
        assert local_hub.history(RESULTS_REPO, "dataset")[-1].parent == seen
        choose_on_page(browser, worst_file)
        # The optional fields start empty: no frame count is claimed for a system that gave none.
        assert browser.evaluate("document.querySelector('#frames textarea, #frames input').value") == ""
        line, _ = send_on_page(browser, "through the page")
        assert line == "Stored: through the page is on the board."
        browser.evaluate("[...document.querySelectorAll('button[role=tab]')].find(b => b.innerText.includes("
                         "'Leaderboard')).click()")
        browser.wait_for("document.querySelector('#board').innerText.includes('through the page')")
    history = local_hub.history(RESULTS_REPO, "dataset")
    assert [commit.title for commit in history[-2:]] == ["Add meanwhile (test)", "Add through the page (test)"]
    rows = {row[2]: row for row in board_rows(space_url)}
    # Significantly below the four; other tests' submissions have the same answers and share its interval.
    assert rows["through the page"][1].split("-")[0] == "5" and rows["through the page"][4] == 0.0
    assert [rows[name][1] for name in ("best", "near", "tied A", "tied B")] == ["1", "2-4", "2-4", "2-4"]


@pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
@pytest.mark.parametrize(("bad", "name", "line"), [
    ("missing", "fine", "Refused: missing.jsonl: no prediction for 1 of the 60 blanks"),
    # Gradio refuses it in the browser, before it is sent (the Space's max_file_size): there is no file to score.
    ("too large", "fine", "Refused: predictions file: choose one"),
    (None, "<img src=x onerror=alert(1)>", "Refused: system name: '<' (U+003C) is not allowed"),
    (None, "human agreement (baseline)", "Refused: system name: 'human agreement (baseline)' is, or looks like, a "
     "baseline's"),
    (None, "tiеd A", "Refused: system name: mixes CYRILLIC and LATIN letters"),  # a Cyrillic e
])
def test_a_bad_submission_is_refused_on_the_page_in_one_line(hub, space_url, bad_files, predictions_files, tmp_path,
                                                            bad, name, line):
    local_hub, _ = hub
    commits = len(local_hub.history(RESULTS_REPO, "dataset"))
    with Chromium(tmp_path / "chromium", window_size=(1400, 1800)) as browser:
        open_board(browser, space_url)
        choose_on_page(browser, bad_files[bad] if bad else predictions_files["tied A"])
        answer, toasts = send_on_page(browser, name)
        assert answer.startswith(line) and "\n" not in answer
        if bad == "too large":
            assert 'Error × File(s) exceed the maximum allowed size of 20.0 Mb: "too_large.json"' in toasts
        assert not browser.evaluate("document.querySelector('img[src=x]')")
    assert len(local_hub.history(RESULTS_REPO, "dataset")) == commits


def test_what_the_api_gets_wrong_and_an_edited_store_are_one_line_each(hub, space_url, worst_file, tmp_path):
    from huggingface_hub import HfApi

    local_hub, env = hub
    line = send_through_api(space_url, worst_file, "frames of letters", frames="abc")
    assert line == "Refused: frames per clip: 'abc' is not a whole number from 1 to 10,000"
    # A submission committed by hand with a metadata.json the page cannot use: the rest of the board is shown.
    metadata = tmp_path / "metadata.json"
    metadata.write_text('{"system": "edited", "frames": "abc"}')
    HfApi(endpoint=local_hub.url, token=env["HF_TOKEN"]).upload_file(
        path_or_fileobj=metadata, path_in_repo="submissions/test/zz-edited/metadata.json", repo_id=RESULTS_REPO,
        repo_type="dataset")
    table, problems = board(space_url)
    assert problems.endswith("zz-edited/metadata.json: frames per clip: 'abc' is not a whole number from 1 to 10,000")
    assert "\n" not in problems and {"best", "near", "tied A", "tied B"} <= {row[2] for row in table["data"]}


def test_a_results_repo_that_refuses_the_commit_is_one_line_and_nothing_is_stored(hub, space_url, worst_file):
    local_hub, _ = hub
    commits = len(local_hub.history(RESULTS_REPO, "dataset"))
    local_hub.fail("/commit/", 403, times=1)
    line = send_through_api(space_url, worst_file, "refused commit")
    assert line.startswith(f"Not stored: the results repo {RESULTS_REPO} could not be written (")
    assert line.endswith("; submit again later") and "\n" not in line
    assert len(local_hub.history(RESULTS_REPO, "dataset")) == commits
    assert "refused commit" not in {row[2] for row in board_rows(space_url)}
