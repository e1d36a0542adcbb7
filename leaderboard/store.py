"""The leaderboard's store of results: a Hub dataset repo (`--results_repo`) or a local folder, one folder a submission.

As the Hub's leaderboards keep their requests and results, each submission is a folder
`submissions/SPLIT/ID/` holding the predictions file as it was sent, `results.json` (what
`fiberbench evaluate` writes for that file alone) and `metadata.json` (the system's name, link and
how it was run). A submission is added in one commit made on top of the revision it was checked
against: if another submission came in meanwhile (the repo's head moved), the commit is refused
(`HeadMoved`) and the caller checks again against the new head and retries, so neither is lost.
"""

import contextlib
import fcntl
import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path

from fiberbench.errors import DataError
from fiberbench.files import atomic_folder

SUBMISSIONS = "submissions"
METADATA_FILE, RESULTS_FILE = "metadata.json", "results.json"


class HeadMoved(Exception):
    """The store changed since the revision a submission was checked against: check again and retry."""


@dataclass(frozen=True)
class Entry:
    """One stored submission as the board reads it: its metadata and its predictions file (a local path)."""

    submission_id: str
    metadata: dict
    predictions: Path


def submission_folders(root: Path, split: str) -> list[Path]:
    """The complete submission folders for `split` under `root`, oldest first.

    A submission being written is a hidden staging folder beside them (`fiberbench.files.atomic_folder`)
    until it is whole: it is not one yet, so hidden names are skipped. A link is never followed: the board
    would read another folder's files as a submission.

    Raises:
        DataError: a submission folder that is a link.
    """
    folders = sorted(folder for folder in (root / SUBMISSIONS / split).glob("*/") if not folder.name.startswith("."))
    for folder in folders:
        if folder.is_symlink():
            raise DataError(f"{folder}: a link, not a submission folder of the store's own; remove it")
    return folders


def read_entries(root: Path, split: str) -> list[Entry]:
    """The submissions for `split` under `root` (a store's folder or a snapshot of its repo), oldest first."""
    entries = []
    for folder in submission_folders(root, split):
        metadata = json.loads((folder / METADATA_FILE).read_text(encoding="utf-8"))
        entries.append(Entry(folder.name, metadata, folder / metadata["predictions"]))
    return entries


class LocalStore:
    """A store in a local folder, for trying the leaderboard offline (and for a Space with no results repo).

    Adding takes a file lock on the folder, so two processes (or two threads) adding at once take turns.
    """

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._threads = threading.Lock()

    def describe(self) -> str:
        return f"the results folder {self.folder}"

    def head(self, split: str) -> str:
        """A revision of the folder: the digest of its submission folders' names."""
        names = [folder.name for folder in submission_folders(self.folder, split)]
        return hashlib.sha256("\n".join(names).encode()).hexdigest()

    def snapshot(self, split: str, revision: str) -> Path:
        return self.folder

    def create(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)

    @contextlib.contextmanager
    def _locked(self):
        self.folder.mkdir(parents=True, exist_ok=True)
        with self._threads, open(self.folder / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def add(self, split: str, submission_id: str, files: dict[str, bytes], parent: str, message: str) -> str:
        """Write the submission's `files` (name -> content) as `submissions/SPLIT/ID/`; its new head.

        Raises `HeadMoved` when the folder is no longer at `parent`.
        """
        with self._locked():
            if self.head(split) != parent:
                raise HeadMoved(f"{self.describe()} changed")
            destination = self.folder / SUBMISSIONS / split / submission_id
            destination.parent.mkdir(parents=True, exist_ok=True)
            with atomic_folder(destination) as staging:
                for name, content in files.items():
                    (staging / name).write_bytes(content)
            return self.head(split)


class HubStore:
    """A store in a Hub dataset repo (e.g. ORG/fiber-results), read at a revision and added to commit by commit."""

    def __init__(self, repo_id: str, token: str | None = None):
        from huggingface_hub import HfApi

        self.repo_id = repo_id
        self.api = HfApi(token=token)

    def describe(self) -> str:
        return f"the results repo {self.repo_id}"

    def head(self, split: str) -> str:
        """The commit at the head of the repo's main branch."""
        from huggingface_hub.errors import RepositoryNotFoundError

        try:
            return self.api.repo_info(self.repo_id, repo_type="dataset").sha
        except RepositoryNotFoundError:
            raise DataError(
                f"{self.describe()}: no such dataset repo at {self.api.endpoint} (or it is private: log in); "
                "`fiberbench leaderboard --add` creates it"
            ) from None

    def create(self) -> None:
        """Create the dataset repo if it does not exist yet."""
        self.api.create_repo(self.repo_id, repo_type="dataset", exist_ok=True)

    def snapshot(self, split: str, revision: str) -> Path:
        """The repo's submissions for `split` at `revision`, downloaded (once) into the Hugging Face cache."""
        from huggingface_hub import snapshot_download

        folder = snapshot_download(
            self.repo_id,
            repo_type="dataset",
            revision=revision,
            allow_patterns=[f"{SUBMISSIONS}/{split}/**"],
            token=self.api.token,
        )
        return Path(folder)

    def add(self, split: str, submission_id: str, files: dict[str, bytes], parent: str, message: str) -> str:
        """Commit the submission's `files` as `submissions/SPLIT/ID/` on top of `parent`; the new head.

        Raises `HeadMoved` when `parent` is no longer the head (the Hub answers 412 Precondition Failed).
        """
        from huggingface_hub import CommitOperationAdd
        from huggingface_hub.errors import HfHubHTTPError

        folder = f"{SUBMISSIONS}/{split}/{submission_id}"
        operations = [
            CommitOperationAdd(path_in_repo=f"{folder}/{name}", path_or_fileobj=content)
            for name, content in files.items()
        ]
        try:
            commit = self.api.create_commit(
                self.repo_id, operations, commit_message=message, repo_type="dataset", parent_commit=parent
            )
        except HfHubHTTPError as error:
            if error.response is not None and error.response.status_code == 412:
                raise HeadMoved(f"{self.describe()} moved past {parent}") from error
            raise
        return commit.oid


def open_store(results_repo: str | None, results_dir: Path | None, token: str | None = None):
    """The store that `--results_repo` or `--results_dir` names (exactly one of them)."""
    return HubStore(results_repo, token) if results_repo is not None else LocalStore(results_dir)
