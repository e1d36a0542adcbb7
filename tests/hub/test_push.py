"""`fiberbench.hub` against the local Hub: a push is one commit or a clear failure; what cannot be loaded is named."""

import socket

import pytest
from huggingface_hub import HfApi, constants, snapshot_download

from fiberbench.errors import UsageError
from fiberbench.hub import HubPushError, hub_problem, push_folder


@pytest.fixture
def folder(tmp_path):
    folder = tmp_path / "artifact"
    (folder / "__pycache__").mkdir(parents=True)
    (folder / "__pycache__" / "module.cpython-311.pyc").write_bytes(b"\0compiled")
    (folder / "README.md").write_text("---\ntags:\n- fiber\n---\n# FIBER artifact\n")
    (folder / "data").mkdir()
    (folder / "data" / "features.npy").write_bytes(bytes(range(256)) * 100)
    return folder


@pytest.mark.parametrize(("repo_type", "url_prefix"), [("model", ""), ("dataset", "datasets/"), ("space", "spaces/")])
def test_a_folder_is_pushed_in_one_commit_byte_for_byte(hub_server, folder, repo_type, url_prefix):
    url = push_folder(folder, "fiber-org/artifact", repo_type=repo_type, commit_message="Add FIBER")
    assert url == f"{hub_server.url}/{url_prefix}fiber-org/artifact"
    assert [commit.title for commit in hub_server.history("fiber-org/artifact", repo_type)][1:] == ["Add FIBER"]
    local = snapshot_download("fiber-org/artifact", repo_type=repo_type)
    assert (folder / "data" / "features.npy").read_bytes() == open(f"{local}/data/features.npy", "rb").read()
    files = sorted(HfApi().list_repo_files("fiber-org/artifact", repo_type=repo_type))
    assert files == [".gitattributes", "README.md", "data/features.npy"]  # no build leftovers


def test_only_the_listed_files_are_pushed(hub_server, folder):
    (folder / "credentials.txt").write_text("a user's file the run did not write")
    push_folder(folder, "fiber-org/artifact", paths=["README.md", "data/features.npy"])
    assert sorted(HfApi().list_repo_files("fiber-org/artifact")) == [".gitattributes", "README.md", "data/features.npy"]


def closed_endpoint(hub, monkeypatch):
    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{probe.getsockname()[1]}")


def link_to_a_secret(folder):
    (folder.parent / "secret").write_text("hf_secret")
    (folder / "data" / "linked").symlink_to(folder.parent / "secret")


# (case, repo id, setup of the Hub, setup of the folder, paths, the error, its words); a UsageError is refused before
# any request.
CASES = [
    ("invalid repo id", "not a/valid/repo", None, None, None, UsageError, "Invalid Hub repo id 'not a/valid/repo'"),
    ("no token", "fiber-org/a", lambda hub, mp: mp.delenv("HF_TOKEN"), None, None, UsageError,
     "No Hugging Face token to push to 'fiber-org/a'"),
    ("a link in the folder", "fiber-org/a", None, link_to_a_secret, None, UsageError, "data/linked is a symbolic link"),
    ("a listed path outside", "fiber-org/a", None, None, ["../secret"], UsageError, "is not inside"),
    ("a listed folder", "fiber-org/a", None, None, ["data"], UsageError, "data is not a file in it"),
    ("an unreachable Hub", "fiber-org/a", closed_endpoint, None, None, HubPushError, "Could not reach the Hub"),
    ("a refused commit", "fiber-org/a", lambda hub, mp: hub.fail("/commit/"), None, None, HubPushError,
     "the push did not complete"),
    ("a refused repo", "fiber-org/a", lambda hub, mp: hub.fail("/repos/create", 403), None, None, HubPushError,
     "the push did not complete"),
]


@pytest.mark.parametrize(("case", "repo_id", "hub", "edit", "paths", "error", "words"), CASES, ids=[c[0] for c in CASES])
def test_a_push_that_cannot_complete_is_one_clear_error_and_pushes_nothing(
    hub_server, folder, monkeypatch, case, repo_id, hub, edit, paths, error, words
):
    (folder.parent / "secret").write_text("hf_secret")
    for setup, argument in ((hub, (hub_server, monkeypatch)), (edit, (folder,))):
        if setup is not None:
            setup(*argument)
    with pytest.raises(error, match=words):
        push_folder(folder, repo_id, paths=paths)
    if error is UsageError:
        assert hub_server.requests == []
    repo = hub_server.store.repos.get(("model", repo_id))
    assert repo is None or list(repo.resolve("main").files) == [".gitattributes"]


def test_push_metric_says_a_failed_push_in_one_line(hub_server, cli_error):
    hub_server.fail("/commit/")
    status, line = cli_error("push-metric", "fiber-org/fiber_metric")
    assert status == 1 and "the push did not complete" in line, line


@pytest.mark.parametrize(
    ("repo_id", "repo_type", "revision", "problem"),
    [
        ("fiber-org/model", "model", None, None),
        ("fiber-org/model", "model", "v9", "has no revision 'v9' of model 'fiber-org/model'"),
        ("fiber-org/other", "model", None, "has no model 'fiber-org/other' (or it is private"),
        ("fiber-org/fiber", "dataset", None, "has no dataset 'fiber-org/fiber' (or it is private"),
    ],
)
def test_what_the_hub_lacks_is_named(hub_server, folder, repo_id, repo_type, revision, problem):
    push_folder(folder, "fiber-org/model")
    found = hub_problem(repo_id, repo_type=repo_type, revision=revision)
    assert found is None if problem is None else problem in found
