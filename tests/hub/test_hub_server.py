"""The local Hub server against the real huggingface_hub client: uploads, downloads, ranges, errors."""

import os
import urllib.error
import urllib.request

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
