"""Bad inputs to `fiberbench push-metric` (the push every artifact shares): one line, exit status 2 or 1, nothing pushed.

The folder-level cases (missing, empty, symbolic links, listed paths outside the folder, a Hub
that never answers) are tested on `push_folder` itself in test_push_folder.py.
"""

import socket

import pytest
from huggingface_hub import constants


def closed_endpoint() -> str:
    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def no_token(hub, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")


def unreachable(hub, monkeypatch):
    monkeypatch.setattr(constants, "ENDPOINT", closed_endpoint())


def failing_commit(hub, monkeypatch):
    hub.fail("/commit/", status=500)


def refused_repo_creation(hub, monkeypatch):
    hub.fail("/repos/create", status=403)


# case -> (repo id, setup, exit status: 2 refused before any request, 1 failed at the Hub, the line's words)
CASES = {
    "invalid repo id": ("not a/valid/repo", None, 2, "Invalid Hub repo id 'not a/valid/repo'"),
    "repo id too long": ("org/" + "x" * 97, None, 2, "Invalid Hub repo id"),
    "no token": ("fiber-org/fiber_metric", no_token, 2, "No Hugging Face token to push to 'fiber-org/fiber_metric'"),
    "unreachable Hub": ("fiber-org/fiber_metric", unreachable, 1, "Could not reach the Hub at http://127.0.0.1:"),
    "commit refused": ("fiber-org/fiber_metric", failing_commit, 1, "the push did not complete"),
    "repo creation refused": ("fiber-org/fiber_metric", refused_repo_creation, 1, "the push did not complete"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_push_that_cannot_complete_is_one_line_and_pushes_nothing(hub_server, monkeypatch, cli_error, case):
    repo_id, setup, expected_status, message = CASES[case]
    if setup is not None:
        setup(hub_server, monkeypatch)
    status, line = cli_error("push-metric", repo_id)
    assert status == expected_status and message in line, line
    repo = hub_server.store.repos.get(("space", repo_id))
    assert repo is None or list(repo.resolve("main").files) == [".gitattributes"]
