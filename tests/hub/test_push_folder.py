"""fiberbench.hub.push_folder against the local Hub: one commit per push, and clear errors."""

import os
import socket

import pytest
from huggingface_hub import HfApi, constants, snapshot_download

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
