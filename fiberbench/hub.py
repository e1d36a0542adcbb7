"""Push a local folder (dataset, model or metric Space) to the Hugging Face Hub in one commit.

Every FIBER artifact is a folder that is uploadable as it is, so one function serves the dataset
builder (`fiberbench build-dataset --push_to_hub`), the training script (`--push_to_hub
--hub_model_id`) and the metric Space. Under it, `push_files` commits files from several places at once (a training
run's model and its latest checkpoint, staged by `stage_files` at the moment of the save). It
talks to the Hub at `HF_ENDPOINT` (default https://huggingface.co), so the same code pushes to a
private Hub or to the tests' local server.
"""

import contextlib
import logging
import os
import shutil
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from huggingface_hub import (
    CommitOperationAdd,
    CommitOperationDelete,
    HfApi,
    constants,
    get_session,
    get_token,
)
from huggingface_hub.errors import GatedRepoError, HFValidationError, RepositoryNotFoundError, RevisionNotFoundError
from huggingface_hub.utils import validate_repo_id

from .errors import FiberbenchError

try:  # huggingface_hub 2 talks HTTP through httpx2, huggingface_hub 1 (CUDA images) through httpx: one API.
    import httpx2 as httpx
except ImportError:
    import httpx

logger = logging.getLogger(__name__)

REPO_TYPES = ("model", "dataset", "space")

# A Space needs an SDK at creation; the metric Space runs `evaluate`'s Gradio widget (app.py).
SPACE_SDK = "gradio"

# huggingface_hub's shared HTTP client has no timeout: a server that accepts the connection and never
# answers would hang a push for good. Seconds to connect, and to wait for each answer or upload chunk.
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 120.0

# Build and editor leftovers that never belong in a Hub repo.
IGNORED_PARTS = frozenset({"__pycache__", ".git", ".ipynb_checkpoints"})
IGNORED_SUFFIXES = frozenset({".pyc", ".pyo"})


class HubPushError(FiberbenchError, RuntimeError):
    """A push that did not complete: bad repo id, no token, or the Hub refused or could not be reached."""


class HubPushUsageError(HubPushError):
    """A push refused before any network call (a bad repo id, no token): a usage error, exit status 2."""

    exit_status = 2


def push_folder(
    folder: str | Path,
    repo_id: str,
    repo_type: str = "model",
    token: str | None = None,
    commit_message: str | None = None,
    private: bool = False,
    *,
    paths: Iterable[str | Path] | None = None,
    read_timeout: float = READ_TIMEOUT,
) -> str:
    """Create `repo_id` if needed and upload files of `folder` to it in a single commit.

    Args:
        folder: the local folder; its layout is kept in the repo (leftovers such as ``__pycache__``,
            ``.git`` and ``*.pyc`` are skipped). A symbolic link in it is refused: it would upload
            whatever it points to, possibly outside the folder.
        repo_id: ``"namespace/name"`` (or ``"name"`` for the token owner's namespace).
        repo_type: ``"model"``, ``"dataset"`` or ``"space"`` (a Gradio Space).
        token: a Hub token; defaults to ``HF_TOKEN`` or the token saved by ``hf auth login``.
        commit_message: defaults to ``"Upload <folder name> with fiberbench"``.
        private: create the repo as private (an existing repo keeps its visibility).
        paths: upload only these files (relative to `folder`), e.g. the files a run wrote, never
            files that were already in the folder; default: every file of the folder.
        read_timeout: seconds to wait for each answer of the Hub (connecting waits `CONNECT_TIMEOUT`).

    Returns:
        The repo URL, e.g. ``https://huggingface.co/datasets/ORG/fiber``.

    Raises:
        ValueError: `repo_type` is not one of `REPO_TYPES`.
        HubPushError: the folder is missing, empty or holds a symbolic link, a listed path is not a
            file of it, the repo id is not valid, no token is available (all checked before any
            network call), or creating the repo or the commit failed or timed out. After this
            error the repo may exist, but no commit of this push was confirmed.
    """
    if repo_type not in REPO_TYPES:
        raise ValueError(f"repo_type must be one of {REPO_TYPES}, got {repo_type!r}")
    folder = Path(folder)
    files = _files_to_upload(folder) if paths is None else _listed_files(folder, paths)
    return push_files(
        {path.relative_to(folder).as_posix(): path for path in files},
        repo_id,
        repo_type=repo_type,
        token=token,
        commit_message=commit_message or f"Upload {folder.name} with fiberbench",
        private=private,
        read_timeout=read_timeout,
        source=str(folder),
    )


def push_files(
    files: Mapping[str, Path],
    repo_id: str,
    *,
    commit_message: str,
    source: str,
    repo_type: str = "model",
    token: str | None = None,
    private: bool = False,
    replace_folders: Iterable[str] = (),
    read_timeout: float = READ_TIMEOUT,
) -> str:
    """Create `repo_id` if needed and upload `files` to it in a single commit; the work of `push_folder`.

    Args:
        files: path in the repo -> a local file (e.g. staged by `stage_files`).
        commit_message: the commit's title.
        source: what is pushed, as error messages name it (a folder, "step 30 of outputs/run").
        replace_folders: folders of the repo whose files not in `files` are deleted by the same
            commit, so that the folder holds exactly what was pushed (e.g. ``last-checkpoint``).
        repo_type, token, private, read_timeout: as `push_folder` takes them.

    Returns the repo URL; raises `HubPushError` as `push_folder` does.
    """
    if repo_type not in REPO_TYPES:
        raise ValueError(f"repo_type must be one of {REPO_TYPES}, got {repo_type!r}")
    token = check_can_push(repo_id, token)
    api = HfApi(token=token)
    operations = [CommitOperationAdd(path_in_repo=path, path_or_fileobj=file) for path, file in sorted(files.items())]
    timeout = httpx.Timeout(read_timeout, connect=CONNECT_TIMEOUT)
    try:
        with _timeout(timeout):
            repo_url = api.create_repo(
                repo_id,
                repo_type=repo_type,
                private=private,
                exist_ok=True,
                space_sdk=SPACE_SDK if repo_type == "space" else None,
            )
            prefixes = tuple(f"{folder.strip('/')}/" for folder in replace_folders)
            if prefixes:
                stale = [
                    path
                    for path in api.list_repo_files(repo_id, repo_type=repo_type)
                    if path.startswith(prefixes) and path not in files
                ]
                operations += [CommitOperationDelete(path_in_repo=path) for path in stale]
            # One create_commit, not upload_folder: with hf_xet installed upload_folder may split a
            # folder into several commits, and a half-pushed dataset must never look complete.
            commit = api.create_commit(repo_id, operations, repo_type=repo_type, commit_message=commit_message)
    except httpx.TimeoutException as err:
        raise HubPushError(
            f"The Hub at {api.endpoint} did not answer in time while pushing {source} to {repo_type} repo "
            f"'{repo_id}' ({type(err).__name__}; timeouts: connect {CONNECT_TIMEOUT:g} s, read "
            f"{read_timeout:g} s). The push did not complete."
        ) from err
    except httpx.TransportError as err:
        raise HubPushError(
            f"Could not reach the Hub at {api.endpoint} while pushing {source} to {repo_type} repo "
            f"'{repo_id}': {err}. The push did not complete; check the network or HF_ENDPOINT."
        ) from err
    # HfHubHTTPError (RepositoryNotFoundError, 401/403, ...) is an OSError; the client raises
    # ValueError for rejected README metadata and RuntimeError when an LFS upload fails.
    except (httpx.HTTPError, OSError, ValueError, RuntimeError) as err:
        raise HubPushError(
            f"Pushing {source} to {repo_type} repo '{repo_id}' at {api.endpoint} failed, "
            f"the push did not complete: {err}"
        ) from err
    logger.info("Pushed %d files from %s to %s (commit %s)", len(files), source, repo_url, commit.oid)
    return str(repo_url)


def stage_files(folder: str | Path, paths: Iterable[str], staging: Path, prefix: str = "") -> dict[str, Path]:
    """Hard-link files of `folder` into `staging` for a later `push_files`: a snapshot of this moment.

    A hard link keeps the content its file had when the folder is replaced meanwhile (a new
    checkpoint or best model renamed into place), since every output is written beside its
    destination and renamed, never rewritten in place: a push in the background uploads what was
    there when it was asked for, never a mix of two saves. (Open file objects would do too, but
    huggingface_hub reads one object twice when two files of a commit have the same content.)
    Where the file system has no hard links, the files are copied. The paths are checked as
    `push_folder` checks them (regular files of the folder, no symbolic link on the way).

    Returns path in the repo (`prefix` + the path in `folder`) -> the staged file.
    """
    folder = Path(folder)
    staged = {}
    for path in _listed_files(folder, paths):
        name = prefix + path.relative_to(folder).as_posix()
        destination = staging / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, destination)
        except OSError:
            shutil.copyfile(path, destination)
        staged[name] = destination
    return staged


def check_can_push(repo_id: str, token: str | None = None) -> str:
    """Check, without any network call, that a push to `repo_id` can start; returns the token to use.

    `push_folder` runs it first; a long job (a build, a training run) should run it before its
    work, so that a wrong repo id or a missing login fails in a second rather than at the end.

    Raises:
        HubPushError: the repo id is not valid, or no token is given, in HF_TOKEN or saved by
            ``hf auth login``.
    """
    try:
        validate_repo_id(repo_id)
    except HFValidationError as err:
        raise HubPushUsageError(f"Invalid Hub repo id {repo_id!r}: {err}") from err
    token = token or get_token()
    if not token:
        raise HubPushUsageError(
            f"No Hugging Face token to push to '{repo_id}': set HF_TOKEN, run `hf auth login`, or pass a token"
        )
    return token


@contextlib.contextmanager
def _timeout(timeout: httpx.Timeout) -> Iterator[None]:
    """Give huggingface_hub's shared client `timeout` for the block (its own default waits forever)."""
    session = get_session()
    previous = session.timeout
    session.timeout = timeout
    try:
        yield
    finally:
        session.timeout = previous


def _refuse_symlink(folder: Path, path: Path) -> None:
    if path.is_symlink():
        raise HubPushError(
            f"Cannot push {folder}: {path.relative_to(folder)} is a symbolic link (to {os.readlink(path)}); "
            "pushing it would upload what it points to. Copy the file into the folder instead."
        )


def _files_to_upload(folder: Path) -> list[Path]:
    """The files of `folder`, sorted, without build and editor leftovers; symbolic links are refused."""
    if not folder.is_dir():
        raise HubPushError(f"Cannot push {folder}: it is not a folder")
    files = []
    for root, folders, names in os.walk(folder):
        root = Path(root)
        folders[:] = [name for name in folders if name not in IGNORED_PARTS]
        for name in folders + names:
            _refuse_symlink(folder, root / name)
        files += [root / name for name in names if Path(name).suffix not in IGNORED_SUFFIXES]
    if not files:
        raise HubPushError(f"Cannot push {folder}: it holds no files")
    return sorted(files)


def _listed_files(folder: Path, paths: Iterable[str | Path]) -> list[Path]:
    """The files `paths` (relative to `folder`), each checked to be a regular file inside it, no link on the way."""
    files = []
    for relative in paths:
        path = folder / relative
        if Path(relative).is_absolute() or ".." in Path(relative).parts:
            raise HubPushError(f"Cannot push {relative}: paths to push are relative to {folder}, without '..'")
        for part in [*reversed(path.relative_to(folder).parents[:-1]), path.relative_to(folder)]:
            _refuse_symlink(folder, folder / part)
        if not path.is_file():
            raise HubPushError(f"Cannot push {folder}: {relative} is not a file in it")
        files.append(path)
    if not files:
        raise HubPushError(f"Cannot push {folder}: no file to push was given")
    return sorted(files)


def is_hub_id(name: str) -> bool:
    """Whether `name` can be a Hub repo id ("name" or "namespace/name"), checked without the network."""
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


# Seconds to wait for the Hub to answer whether a model or dataset exists, before loading it.
PROBE_TIMEOUT = 10.0


def hub_problem(repo_id: str, *, repo_type: str = "model", revision: str | None = None) -> str | None:
    """Why `repo_id` (a model or dataset) cannot be downloaded from the Hub right now, or None when it can."""
    try:
        HfApi().repo_info(repo_id, repo_type=repo_type, revision=revision, timeout=PROBE_TIMEOUT)
    except RevisionNotFoundError:
        return f"the Hub at {constants.ENDPOINT} has no revision {revision!r} of {repo_type} {repo_id!r}"
    except GatedRepoError:
        return f"{repo_type} {repo_id!r} is gated: accept its conditions on the Hub, then log in with `hf auth login`"
    except RepositoryNotFoundError:
        return (
            f"the Hub at {constants.ENDPOINT} has no {repo_type} {repo_id!r} (or it is private: log in with "
            "`hf auth login`)"
        )
    # The HTTP client's errors (connection refused, name not resolved, timeout) have no common
    # base class across huggingface_hub releases; each means the Hub cannot be reached.
    except Exception as error:  # noqa: BLE001
        return f"the Hub at {constants.ENDPOINT} cannot be reached ({type(error).__name__}: {error})"
    return None
