"""The local Hub server against the real huggingface_hub client: uploads, downloads, ranges, errors."""

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from huggingface_hub import HfApi, HfFileSystem, hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    HfHubHTTPError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

REPO_ID = "fiber-org/server-test"


@pytest.fixture
def folder(tmp_path):
    """A folder with a card, a nested text file, a binary (LFS) file and an empty file."""
    folder = tmp_path / "upload"
    (folder / "nested" / "deeper").mkdir(parents=True)
    (folder / "README.md").write_text("---\nlicense: apache-2.0\n---\n# A test repo\n")
    (folder / "nested" / "deeper" / "notes.txt").write_text("fill in the blanks\n" * 50)
    (folder / "weights.safetensors").write_bytes(os.urandom(300_000))
    (folder / "empty.txt").write_bytes(b"")
    return folder


@pytest.fixture
def uploaded(hub_server, folder):
    """The folder pushed to REPO_ID with the client's create_repo + upload_folder."""
    api = HfApi()
    api.create_repo(REPO_ID)
    return api.upload_folder(folder_path=folder, repo_id=REPO_ID, commit_message="add files")


def relative_files(root):
    return sorted(path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file())


def test_create_repo_is_idempotent_with_exist_ok_and_typed(hub_server):
    api = HfApi()
    assert api.create_repo(REPO_ID) == f"{hub_server.url}/{REPO_ID}"
    assert api.create_repo(REPO_ID, exist_ok=True) == f"{hub_server.url}/{REPO_ID}"
    with pytest.raises(HfHubHTTPError) as raised:
        api.create_repo(REPO_ID)
    assert raised.value.response.status_code == 409
    assert api.create_repo(REPO_ID, repo_type="dataset") == f"{hub_server.url}/datasets/{REPO_ID}"
    assert api.create_repo(REPO_ID, repo_type="space", space_sdk="gradio").endswith(f"/spaces/{REPO_ID}")
    assert api.space_info(REPO_ID).sdk == "gradio"
    assert api.whoami()["name"] == "fiber-tester"


def test_upload_folder_lists_files_and_moves_the_branch(hub_server, folder, uploaded):
    api = HfApi()
    expected = sorted([".gitattributes", *relative_files(folder)])
    assert sorted(api.list_repo_files(REPO_ID)) == expected
    assert api.model_info(REPO_ID).sha == uploaded.oid
    assert api.list_repo_refs(REPO_ID).branches[0].target_commit == uploaded.oid

    top_level = {entry.path for entry in api.list_repo_tree(REPO_ID)}
    assert top_level == {".gitattributes", "README.md", "empty.txt", "nested", "weights.safetensors"}
    assert {entry.path for entry in api.list_repo_tree(REPO_ID, path_in_repo="nested")} == {"nested/deeper"}
    weights, deeper = api.get_paths_info(REPO_ID, ["weights.safetensors", "nested/deeper", "missing.txt"])
    assert weights.lfs is not None and weights.lfs.size == 300_000
    assert deeper.path == "nested/deeper"

    # Pushing the same files again changes nothing: the server reports their oids at preupload.
    again = api.upload_folder(folder_path=folder, repo_id=REPO_ID)
    assert again.oid == uploaded.oid


def test_downloads_are_byte_identical(hub_server, folder, uploaded, tmp_path):
    path = hf_hub_download(REPO_ID, "weights.safetensors")
    assert open(path, "rb").read() == (folder / "weights.safetensors").read_bytes()

    snapshot = snapshot_download(REPO_ID, revision=uploaded.oid)
    for name in relative_files(folder):
        assert (folder / name).read_bytes() == (tmp_path / snapshot / name).read_bytes(), name


def test_range_requests(hub_server, folder, uploaded):
    content = (folder / "weights.safetensors").read_bytes()
    with HfFileSystem().open(f"{REPO_ID}/weights.safetensors", "rb", block_size=1024) as remote:
        remote.seek(100_000)
        assert remote.read(5000) == content[100_000:105_000]
    assert any(status == 206 for _, _, status in hub_server.requests)

    url = f"{hub_server.url}/{REPO_ID}/resolve/main/weights.safetensors"
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Range": "bytes=-10"})) as response:
        assert response.status == 206
        assert response.headers["Content-Range"] == f"bytes {len(content) - 10}-{len(content) - 1}/{len(content)}"
        assert response.read() == content[-10:]
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(urllib.request.Request(url, headers={"Range": f"bytes={len(content)}-"}))
    assert raised.value.code == 416


def test_missing_repo_file_and_revision_raise_the_clients_errors(hub_server, uploaded):
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("fiber-org/no-such-repo", "README.md")
    with pytest.raises(RepositoryNotFoundError):
        HfApi().model_info(REPO_ID.replace("server", "dataset"))
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download(REPO_ID, "no-such-file.txt")
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(REPO_ID, "README.md", revision="no-such-branch")
    with pytest.raises(RevisionNotFoundError):
        HfApi().list_repo_tree(REPO_ID, revision="0" * 40).__next__()


def test_an_unserved_route_fails_and_is_recorded(hub_server):
    with pytest.raises(HfHubHTTPError) as raised:
        HfApi().list_repo_commits(REPO_ID)
    assert raised.value.response.status_code == 404
    assert hub_server.unhandled == [f"GET /api/models/{REPO_ID}/commits/main"]
    hub_server.unhandled.clear()  # recorded as intended; the fixture fails a test that leaves any


def post_commit(hub_server, lines) -> int:
    """POST an NDJSON commit to REPO_ID by hand (the client never sends such paths); returns the status."""
    body = "\n".join(json.dumps(line) for line in lines).encode()
    request = urllib.request.Request(
        f"{hub_server.url}/api/models/{REPO_ID}/commit/main",
        data=body,
        method="POST",
        headers={"Authorization": "Bearer hf_local_test_token", "Content-Type": "application/x-ndjson"},
    )
    try:
        with urllib.request.urlopen(request) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


@pytest.mark.parametrize("oid", ["/etc/hostname", "../x", "../../blobs/" + "0" * 64, "A" * 64, "0" * 63])
def test_an_lfs_oid_that_is_not_a_sha256_is_refused(hub_server, oid):
    HfApi().create_repo(REPO_ID)
    header = {"key": "header", "value": {"summary": "steal a host file"}}
    operation = {"key": "lfsFile", "value": {"path": "stolen.txt", "algo": "sha256", "oid": oid}}
    assert post_commit(hub_server, [header, operation]) == 400
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download(REPO_ID, "stolen.txt")


@pytest.mark.parametrize("path", ["../x", "/abs", "a/../../x", "a//b", "./a"])
def test_a_commit_path_outside_the_repo_is_refused(hub_server, path):
    HfApi().create_repo(REPO_ID)
    header = {"key": "header", "value": {"summary": "escape"}}
    operation = {"key": "file", "value": {"path": path, "encoding": "base64", "content": "eA=="}}
    assert post_commit(hub_server, [header, operation]) == 400


@pytest.mark.parametrize(
    "headers, body",
    [
        ("Content-Length: many", b"{}"),
        ("Content-Length: -5", b"{}"),
        ("Content-Length: 1e3", b"{}"),
        ("Transfer-Encoding: chunked", b"zz\r\n{}\r\n0\r\n\r\n"),
        ("Transfer-Encoding: chunked", b"-2\r\n{}\r\n0\r\n\r\n"),
        ("Transfer-Encoding: chunked", b"\r\n"),
    ],
    ids=["length not a number", "negative length", "length a float", "chunk size not hex", "negative chunk size",
         "no chunk size"],
)
def test_a_request_whose_body_cannot_be_read_is_answered_400(hub_server, capfd, headers, body):
    """As a real server answers a malformed request: a 400, not a dropped connection and a thread's traceback."""
    import socket

    host, port = hub_server.url.removeprefix("http://").split(":")
    request = f"POST /api/repos/create HTTP/1.1\r\nHost: {host}\r\n{headers}\r\nConnection: close\r\n\r\n"
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(request.encode() + body)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert b"body" in answer.split(b"\r\n\r\n", 1)[1]
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
def test_the_server_run_by_hand_removes_its_storage_when_stopped(signal_name):
    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("hub_server.py"))], stdout=subprocess.PIPE, text=True
    )
    try:
        server.stdout.readline()
        storage = Path(re.search(r"storage (\S+) is removed", server.stdout.readline())[1])
        assert storage.is_dir()
    finally:
        server.send_signal(getattr(signal, signal_name))
        server.wait(timeout=30)
    assert not storage.exists()
