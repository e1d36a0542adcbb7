"""Headless Chromium driven through its DevTools protocol, for the browser tests (the annotation page).

Input goes through the protocol's input events (typed text, the Enter key, mouse clicks at an
element's place on the screen), as a person's would. Every host name except 127.0.0.1 resolves to
nothing, so a page sees no network; `intercept` answers chosen requests before they leave.
"""

import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from websockets.sync.client import connect

CHROMIUM = shutil.which("chromium")
SKIP_REASON = "Debian's chromium is not installed (apt-get install chromium; .ci/run installs it)"
# The flags that let headless Chromium run here: no sandbox as root, no GPU, and no background
# traffic to a network this machine cannot reach.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]
TIMEOUT = 60.0


class DevToolsError(RuntimeError):
    """A protocol command failed, a page threw, or the browser did not answer in time."""


class Chromium:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, profile_dir: Path, window_size: tuple[int, int] = (1100, 1400)) -> None:
        profile_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = profile_dir / "chromium.log"
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                [
                    CHROMIUM,
                    *FLAGS,
                    f"--user-data-dir={profile_dir}",
                    "--remote-debugging-port=0",
                    f"--window-size={window_size[0]},{window_size[1]}",
                    "about:blank",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._resources = contextlib.ExitStack()
        try:
            url = self._browser_url(profile_dir)
            self.socket = self._resources.enter_context(connect(url, max_size=None, open_timeout=TIMEOUT))
            self.ids = itertools.count(1)
            self.responses: dict[int, dict] = {}
            self.handlers: dict[str, Callable[[dict], None]] = {}
            self.exceptions: list[str] = []
            self.document: str | None = None  # the loader id of the main frame's document
            self.loaded = False  # whether that document's load event has fired
            target = self.send("Target.createTarget", {"url": "about:blank"}, on_page=False)["targetId"]
            self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, on_page=False)[
                "sessionId"
            ]
            self.send("Page.enable")
            self.send("Runtime.enable")
        except BaseException:
            self.close()
            raise

    def _browser_url(self, profile_dir: Path) -> str:
        """The browser's DevTools address, which Chromium writes into the profile once it listens."""
        port_file = profile_dir / "DevToolsActivePort"
        deadline = time.monotonic() + TIMEOUT
        while not (port_file.is_file() and len(lines := port_file.read_text().split()) == 2):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise DevToolsError(f"Chromium did not start:\n{self.log_path.read_text()}")
            time.sleep(0.05)
        return f"ws://127.0.0.1:{lines[0]}{lines[1]}"

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        self._resources.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    # The protocol: commands and their answers, with events handled as they arrive.
    def send(self, method: str, params: dict | None = None, on_page: bool = True) -> dict:
        message_id = next(self.ids)
        message = {"id": message_id, "method": method, "params": params or {}}
        if on_page:
            message["sessionId"] = self.session
        self.socket.send(json.dumps(message))
        deadline = time.monotonic() + TIMEOUT
        while message_id not in self.responses:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DevToolsError(f"no answer to {method} in {TIMEOUT} s")
            self._receive(remaining)
        response = self.responses.pop(message_id)
        if "error" in response:
            raise DevToolsError(f"{method}: {response['error']}")
        return response["result"]

    def _receive(self, timeout: float) -> None:
        try:
            message = json.loads(self.socket.recv(timeout=timeout))
        except TimeoutError:
            return
        if "id" in message:
            self.responses[message["id"]] = message
            return
        method, params = message["method"], message.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.exceptions.append(details.get("exception", {}).get("description") or details["text"])
        elif method == "Page.frameNavigated" and "parentId" not in params["frame"]:
            self.document, self.loaded = params["frame"]["loaderId"], False
        elif method == "Page.loadEventFired":
            self.loaded = True
        elif method in self.handlers:
            self.handlers[method](params)

    def intercept(self, url_pattern: str, body: str, content_type: str) -> None:
        """Answer every request matching `url_pattern` (`*` wildcards) with `body`, before it leaves."""

        def fulfill(params: dict) -> None:
            self.send(
                "Fetch.fulfillRequest",
                {
                    "requestId": params["requestId"],
                    "responseCode": 200,
                    "responseHeaders": [{"name": "Content-Type", "value": content_type}],
                    "body": base64.b64encode(body.encode()).decode(),
                },
            )

        self.handlers["Fetch.requestPaused"] = fulfill
        self.send("Fetch.enable", {"patterns": [{"urlPattern": url_pattern, "requestStage": "Request"}]})

    # The page.
    def open(self, url: str) -> None:
        """Load `url` and wait until its load event has fired (not a load event of the page before)."""
        loader = self.send("Page.navigate", {"url": url})["loaderId"]
        self.wait_until(lambda: self.document == loader and self.loaded, f"{url} did not load")

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (awaited if it is a promise)."""
        result = self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise DevToolsError(details.get("exception", {}).get("description") or details["text"])
        return result["result"].get("value")

    def wait_until(self, condition: Callable[[], object], failure: str, timeout: float = TIMEOUT):
        """Poll `condition` (a Python callable) until it is true; returns its value.

        The deadline only matters when the page is stuck: the failure then says what was awaited and what the
        page showed.
        """
        deadline = time.monotonic() + timeout
        while not (value := condition()):
            if time.monotonic() > deadline:
                raise DevToolsError(f"{failure} within {timeout:g} s; {self.describe_page()}")
            self._receive(0.05)
        return value

    def describe_page(self) -> str:
        """What the page threw and the start of its text (Gradio's error messages among it), for a failure."""
        try:
            text = " ".join(self.evaluate("document.body ? document.body.innerText : ''").split())
        except DevToolsError as error:
            text = f"(not readable: {error})"
        return f"the page threw {self.exceptions or 'nothing'}; its text: {text[:2000]!r}"

    def wait_for(self, expression: str, timeout: float = TIMEOUT):
        """Poll a JavaScript expression until it is truthy; returns its value."""
        return self.wait_until(lambda: self.evaluate(expression), f"never true: {expression}", timeout)

    # A person's input.
    def click(self, selector: str) -> None:
        """A left click in the middle of the element that `selector` finds, scrolled into view."""
        box = self.evaluate(
            f"(() => {{ const element = document.querySelector({json.dumps(selector)});"
            " element.scrollIntoView({block: 'center'}); const box = element.getBoundingClientRect();"
            " return [box.x + box.width / 2, box.y + box.height / 2]; })()"
        )
        x, y = box
        self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
        for event in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": event, "x": x, "y": y, "button": "left", "clickCount": 1})

    def choose_file(self, selector: str, path: Path) -> None:
        """Choose `path` in the file input that `selector` finds, as a person picking it in the file dialog."""
        found = self.send("Runtime.evaluate", {"expression": f"document.querySelector({json.dumps(selector)})"})
        self.send("DOM.setFileInputFiles", {"files": [str(path)], "objectId": found["result"]["objectId"]})

    def type(self, text: str) -> None:
        """Type `text` into the focused element."""
        self.send("Input.insertText", {"text": text})

    def press_enter(self) -> None:
        key = {"key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "nativeVirtualKeyCode": 13}
        self.send("Input.dispatchKeyEvent", {"type": "keyDown", "text": "\r", **key})
        self.send("Input.dispatchKeyEvent", {"type": "keyUp", **key})

    def screenshot(self, path: Path) -> None:
        """A PNG of the whole page, not only the window."""
        size = self.send("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip})
        path.write_bytes(base64.b64decode(data["data"]))
