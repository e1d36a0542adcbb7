"""The Hub helpers every artifact shares: push a folder in one commit, and say why a repo cannot be used.

The code talks to the Hub at `HF_ENDPOINT` (default https://huggingface.co), so the same calls reach a
private Hub or the tests' local server.
"""

import logging
import os
from collections.abc import Iterable
from pathlib import Path

from huggingface_hub import CommitOperationAdd, HfApi, constants, get_token
from huggingface_hub.errors import GatedRepoError, HFValidationError, RepositoryNotFoundError, RevisionNotFoundError
from huggingface_hub.utils import validate_repo_id

from .errors import DataError, UsageError

logger = logging.getLogger(__name__)

REPO_TYPES = ("model", "dataset", "space")
# Build and editor leftovers that never belong in a Hub repo.
IGNORED_NAMES = frozenset({"__pycache__", ".git", ".ipynb_checkpoints"})
# Seconds to wait for the Hub to say whether a repo exists, before loading from it.
PROBE_TIMEOUT = 10.0


class HubPushError(DataError):
    """A push that did not complete: the Hub refused it or could not be reached."""


def push_folder(
    folder: str | os.PathLike,
    repo_id: str,
    repo_type: str = "model",
    token: str | None = None,
    commit_message: str | None = None,
    private: bool = False,
    *,
    paths: Iterable[str] | None = None,
) -> str:
    """Create `repo_id` if needed and upload the files of `folder` (or only `paths`, relative to it) in one commit.

    A symbolic link in the folder is refused: it would upload what it points to. The repo id and the token are
    checked before any request (`UsageError`); a push that fails is a `HubPushError` naming the repo and endpoint.
    Returns the repo's URL.
    """
    if repo_type not in REPO_TYPES:
        raise ValueError(f"repo_type must be one of {REPO_TYPES}, got {repo_type!r}")
    folder = Path(folder)
    files = _files(folder, paths)
    token = check_can_push(repo_id, token)
    api = HfApi(token=token)
    # One create_commit, not upload_folder: a push is one commit or none, never a half-pushed dataset.
    operations = [CommitOperationAdd(path.relative_to(folder).as_posix(), str(path)) for path in files]
    try:
        url = api.create_repo(repo_id, repo_type=repo_type, private=private, exist_ok=True,
                              space_sdk="gradio" if repo_type == "space" else None)
        commit = api.create_commit(repo_id, operations, repo_type=repo_type,
                                   commit_message=commit_message or f"Upload {folder.name} with fiberbench")
    # The client's HTTP errors are OSErrors (or httpx's, which have no common base across huggingface_hub
    # releases); it raises ValueError for rejected card metadata and RuntimeError for a failed LFS upload.
    except Exception as error:  # noqa: BLE001
        reached = "Could not reach the Hub" if "connect" in type(error).__name__.lower() else "The Hub refused the push"
        raise HubPushError(
            f"{reached} of {folder} to {repo_type} repo '{repo_id}' at {api.endpoint}: the push did not complete "
            f"({type(error).__name__}: {error})"
        ) from error
    logger.info("Pushed %d files from %s to %s (commit %s)", len(files), folder, url, commit.oid)
    return str(url)


def check_can_push(repo_id: str, token: str | None = None) -> str:
    """Check, without any request, that a push to `repo_id` can start (a valid id, a token); returns the token.

    A long job (a build, a training run) calls it before its work, so that a typo fails in a second, not at the end.
    """
    if not is_hub_id(repo_id):
        raise UsageError(f"Invalid Hub repo id {repo_id!r}: use 'name' or 'namespace/name'")
    token = token or get_token()
    if not token:
        raise UsageError(f"No Hugging Face token to push to '{repo_id}': set HF_TOKEN or run `hf auth login`")
    return token


def is_hub_id(name: str) -> bool:
    """Whether `name` can be a Hub repo id ("name" or "namespace/name"), checked without the network."""
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def hub_problem(repo_id: str, *, repo_type: str = "model", revision: str | None = None) -> str | None:
    """Why `repo_id` cannot be downloaded from the Hub now, in words, or None when it can."""
    try:
        HfApi().repo_info(repo_id, repo_type=repo_type, revision=revision, timeout=PROBE_TIMEOUT)
    except RevisionNotFoundError:
        return f"the Hub at {constants.ENDPOINT} has no revision {revision!r} of {repo_type} {repo_id!r}"
    except GatedRepoError:
        return f"{repo_type} {repo_id!r} is gated: accept its conditions on the Hub, then `hf auth login`"
    except RepositoryNotFoundError:
        return f"the Hub at {constants.ENDPOINT} has no {repo_type} {repo_id!r} (or it is private: `hf auth login`)"
    except Exception as error:  # noqa: BLE001 (connection refused, name not resolved, timeout: no common base class)
        return f"the Hub at {constants.ENDPOINT} cannot be reached ({type(error).__name__}: {error})"
    return None


def _files(folder: Path, paths: Iterable[str] | None) -> list[Path]:
    """The files to push, sorted: `paths` (each a file inside `folder`) or every file but build leftovers."""
    if not folder.is_dir():
        raise UsageError(f"Cannot push {folder}: it is not a folder")
    if paths is None:
        found = [p for p in folder.rglob("*") if not IGNORED_NAMES & set(p.relative_to(folder).parts)]
        files = [p for p in found if p.is_symlink() or p.is_file() and p.suffix not in (".pyc", ".pyo")]
    else:
        files = [folder / p for p in paths]
    for path in files:
        inside = Path(os.path.relpath(path, folder))
        if inside.is_absolute() or ".." in inside.parts:
            raise UsageError(f"Cannot push {path}: it is not inside {folder}")
        link = next((p for p in [*reversed(inside.parents[:-1]), inside] if (folder / p).is_symlink()), None)
        if link is not None:
            raise UsageError(f"Cannot push {folder}: {link} is a symbolic link; it would upload what it points to")
        if not path.is_file():
            raise UsageError(f"Cannot push {folder}: {inside} is not a file in it")
    if not files:
        raise UsageError(f"Cannot push {folder}: it holds no files")
    return sorted(files)
