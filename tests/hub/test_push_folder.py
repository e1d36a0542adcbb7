"""fiberbench.hub.push_folder against the local Hub: one commit per push, and clear errors."""

import contextlib
import os
import socket
import threading
import time

import pytest
from huggingface_hub import HfApi, constants, get_session, snapshot_download

from fiberbench.hub import HubPushError, check_can_push, push_folder


@pytest.fixture
def folder(tmp_path):
    folder = tmp_path / "artifact"
    (folder / "__pycache__").mkdir(parents=True)
    (folder / "__pycache__" / "module.cpython-311.pyc").write_bytes(b"\0compiled")
    (folder / "README.md").write_text("---\ntags:\n- fiber\n---\n# FIBER artifact\n")
    (folder / "data").mkdir()
    (folder / "data" / "features.npy").write_bytes(bytes(range(256)) * 100)
    return folder


@pytest.mark.parametrize(
    ("repo_type", "url_prefix"), [("model", ""), ("dataset", "datasets/"), ("space", "spaces/")]
)
def test_push_folder_uploads_everything_in_one_commit(hub_server, folder, repo_type, url_prefix):
    url = push_folder(folder, "fiber-org/artifact", repo_type=repo_type, commit_message="Add FIBER")

    assert url == f"{hub_server.url}/{url_prefix}fiber-org/artifact"
    repo = hub_server.store.repos[(repo_type, "fiber-org/artifact")]
    assert len(repo.commits) == 2  # the repo's initial commit and this push
    assert repo.resolve("main").title == "Add FIBER"
    local = snapshot_download("fiber-org/artifact", repo_type=repo_type)
    assert (folder / "data" / "features.npy").read_bytes() == open(f"{local}/data/features.npy", "rb").read()
    assert sorted(HfApi().list_repo_files("fiber-org/artifact", repo_type=repo_type)) == [
        ".gitattributes",
        "README.md",
        "data/features.npy",
    ]


def test_push_folder_to_an_existing_repo_adds_a_commit(hub_server, folder):
    push_folder(folder, "fiber-org/artifact")
    (folder / "results.json").write_text('{"f1": 50.0}')
    push_folder(folder, "fiber-org/artifact", private=True)
    assert "results.json" in HfApi().list_repo_files("fiber-org/artifact")


def test_no_token_fails_before_any_request(hub_server, folder, monkeypatch):
    assert check_can_push("fiber-org/artifact") == os.environ["HF_TOKEN"]
    assert check_can_push("fiber-org/artifact", token="hf_given") == "hf_given"
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(HubPushError, match=r"No Hugging Face token to push to 'fiber-org/artifact'.*HF_TOKEN"):
        push_folder(folder, "fiber-org/artifact")
    assert hub_server.requests == []


@pytest.mark.parametrize("repo_id", ["fiber-org/bad--name", "a/b/c", "fiber org/x", "x" * 97])
def test_invalid_repo_id_fails_before_any_request(hub_server, folder, repo_id):
    with pytest.raises(HubPushError, match="Invalid Hub repo id"):
        push_folder(folder, repo_id)
    assert hub_server.requests == []


def test_bad_arguments(hub_server, tmp_path):
    with pytest.raises(ValueError, match="repo_type"):
        push_folder(tmp_path, "fiber-org/x", repo_type="kernel")
    with pytest.raises(HubPushError, match="not a folder"):
        push_folder(tmp_path / "missing", "fiber-org/x")
    with pytest.raises(HubPushError, match="holds no files"):
        push_folder(tmp_path, "fiber-org/x")


def test_unreachable_hub_is_a_clear_error(hub_server, folder, monkeypatch):
    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        closed_endpoint = f"http://127.0.0.1:{probe.getsockname()[1]}"
    monkeypatch.setattr(constants, "ENDPOINT", closed_endpoint)
    with pytest.raises(HubPushError, match=f"Could not reach the Hub at {closed_endpoint}.*did not complete"):
        push_folder(folder, "fiber-org/artifact")


def test_a_failed_commit_is_never_reported_as_pushed(hub_server, folder):
    hub_server.fail("/commit/", status=500)
    with pytest.raises(HubPushError, match=r"'fiber-org/artifact' at http://127\.0\.0\.1.*did not complete"):
        push_folder(folder, "fiber-org/artifact")
    repo = hub_server.store.repos[("model", "fiber-org/artifact")]
    assert list(repo.resolve("main").files) == [".gitattributes"]


@pytest.fixture
def silent_endpoint(monkeypatch):
    """An endpoint that accepts connections and never answers (the hang reported against push_folder)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted = []
    stop = threading.Event()

    def accept_and_keep():
        server.settimeout(0.1)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                accepted.append(server.accept()[0])

    thread = threading.Thread(target=accept_and_keep, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{server.getsockname()[1]}"
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    yield endpoint
    stop.set()
    thread.join()
    for connection in accepted:
        connection.close()
    server.close()


def test_a_hub_that_never_answers_times_out_with_a_clear_error(hub_server, folder, silent_endpoint):
    started = time.monotonic()
    with pytest.raises(HubPushError, match=r"did not answer in time.*timeouts: connect 10 s, read 0.5 s"):
        push_folder(folder, "fiber-org/artifact", read_timeout=0.5)
    # The client retries timed-out requests a few times with back-off; it still ends, and soon.
    assert time.monotonic() - started < 120
    assert get_session().timeout.read is None  # the shared client is left as it was


@pytest.mark.parametrize("link", ["file", "folder"])
def test_a_symbolic_link_in_the_folder_is_refused(hub_server, folder, tmp_path, link):
    secret = tmp_path / "outside"
    secret.mkdir()
    (secret / "credentials.txt").write_text("hf_secret")
    target = secret / "credentials.txt" if link == "file" else secret
    (folder / "data" / "linked").symlink_to(target)
    with pytest.raises(HubPushError, match=r"data/linked is a symbolic link"):
        push_folder(folder, "fiber-org/artifact")
    assert hub_server.requests == []


def test_only_the_listed_paths_are_pushed(hub_server, folder):
    (folder / "credentials.txt").write_text("a user's file the run did not write")
    push_folder(folder, "fiber-org/artifact", paths=["README.md", "data/features.npy"])
    assert sorted(HfApi().list_repo_files("fiber-org/artifact")) == [".gitattributes", "README.md", "data/features.npy"]


@pytest.mark.parametrize("path", ["missing.txt", "../outside.txt", "data"])
def test_a_listed_path_that_is_not_a_file_of_the_folder_is_refused(hub_server, folder, tmp_path, path):
    (tmp_path / "outside.txt").write_text("x")
    with pytest.raises(HubPushError, match="Cannot push"):
        push_folder(folder, "fiber-org/artifact", paths=[path])
    assert hub_server.requests == []
