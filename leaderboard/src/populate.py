"""The board's data: the store of submissions (a Hub dataset repo, or a local folder to try it), and the board computed
from it by `fiberbench evaluate`'s code, with rank intervals and Holm-corrected p-values.

As the Hub's leaderboards keep their requests and results, each submission is a folder `submissions/SPLIT/ID/`: the
predictions file as sent, `results.json` (evaluate's, for that file alone) and `metadata.json` (name, link, how it
was run). A submission is committed on top of the revision it was checked against; when another came in meanwhile the
commit is refused (`HeadMoved`) and the caller checks again on the new head, so neither is lost.
"""

import hashlib
import json
from pathlib import Path

import filelock
import numpy as np
from huggingface_hub import CommitOperationAdd, HfApi, snapshot_download
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

from fiberbench.errors import DataError
from fiberbench.metric import paired_bootstrap_means
from fiberbench.metric.evaluate.predictions import Split, System, join, read_rows
from fiberbench.metric.evaluate.results import evaluate_systems, score_columns
from fiberbench.outputs import atomic_folder

SUBMISSIONS, METADATA_FILE, RESULTS_FILE = "submissions", "metadata.json", "results.json"


class HeadMoved(Exception):
    """The store changed since the revision a submission was checked against: check again and retry."""


def submission_folders(root: Path, split: str) -> list[Path]:
    """The complete submissions for `split` under `root`, oldest first (one being written is a hidden staging folder);
    a link is refused, never followed (it would make another folder a submission)."""
    folders = sorted(folder for folder in (root / SUBMISSIONS / split).glob("*/") if not folder.name.startswith("."))
    for folder in folders:
        if folder.is_symlink():
            raise DataError(f"{folder}: a link, not a submission folder of the store's own; remove it")
    return folders


def read_entries(root: Path, split: str) -> list[tuple[dict, Path]]:
    """(metadata, predictions file) of each submission for `split` under `root` (a store's folder or a snapshot)."""
    entries = []
    for folder in submission_folders(root, split):
        metadata = json.loads((folder / METADATA_FILE).read_text(encoding="utf-8"))
        entries.append((metadata, folder / metadata["predictions"]))
    return entries


class LocalStore:
    """A store in a local folder; adding takes a file lock, so processes (or threads) adding at once take turns."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def describe(self) -> str:
        return f"the results folder {self.folder}"

    def create(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)

    def head(self, split: str) -> str:
        names = "\n".join(folder.name for folder in submission_folders(self.folder, split))
        return hashlib.sha256(names.encode()).hexdigest()

    def snapshot(self, split: str, revision: str) -> Path:
        return self.folder

    def add(self, split: str, submission_id: str, files: dict[str, bytes], parent: str, message: str) -> str:
        self.create()
        with filelock.FileLock(self.folder / ".lock"):
            if self.head(split) != parent:
                raise HeadMoved(f"{self.describe()} changed")
            with atomic_folder(self.folder / SUBMISSIONS / split / submission_id) as staging:
                for name, content in files.items():
                    (staging / name).write_bytes(content)
            return self.head(split)


class HubStore:
    """A store in a Hub dataset repo (e.g. ORG/fiber-results), read at a revision and added to commit by commit."""

    def __init__(self, repo_id: str, token: str | None = None):
        self.repo_id, self.api = repo_id, HfApi(token=token)

    def describe(self) -> str:
        return f"the results repo {self.repo_id}"

    def create(self) -> None:
        self.api.create_repo(self.repo_id, repo_type="dataset", exist_ok=True)

    def head(self, split: str) -> str:
        try:
            return self.api.repo_info(self.repo_id, repo_type="dataset").sha
        except RepositoryNotFoundError:
            raise DataError(f"{self.describe()}: no such dataset repo at {self.api.endpoint} (or it is private: log "
                            "in); `fiberbench leaderboard --add` creates it") from None

    def snapshot(self, split: str, revision: str) -> Path:
        return Path(snapshot_download(self.repo_id, repo_type="dataset", revision=revision, token=self.api.token,
                                      allow_patterns=[f"{SUBMISSIONS}/{split}/**"]))

    def add(self, split: str, submission_id: str, files: dict[str, bytes], parent: str, message: str) -> str:
        operations = [CommitOperationAdd(f"{SUBMISSIONS}/{split}/{submission_id}/{name}", content)
                      for name, content in files.items()]
        try:
            return self.api.create_commit(self.repo_id, operations, commit_message=message, repo_type="dataset",
                                          parent_commit=parent).oid
        except HfHubHTTPError as error:  # 412 Precondition Failed: `parent` is no longer the head
            if error.response is not None and error.response.status_code == 412:
                raise HeadMoved(f"{self.describe()} moved past {parent}") from error
            raise


def open_store(results_repo: str | None, results_dir: Path | None, token: str | None = None):
    """The store that `--results_repo` or `--results_dir` names (exactly one of them)."""
    return HubStore(results_repo, token) if results_repo is not None else LocalStore(results_dir)


def join_file(split: Split, path: Path, name: str) -> System:
    """A predictions file joined to the split as `fiberbench evaluate` joins it (a `DataError` says what is wrong)."""
    return System(name, str(path), *join(path, read_rows(path), split))


def rank_intervals(columns: dict, confidence_level=0.95, num_bootstrap=10_000, seed=0) -> dict[str, tuple[int, int]]:
    """Each system's rank interval (best rank 1) from its per-blank scores (`columns`: name -> scores, same blanks):
    in each paired resample of the blanks (the same blanks for every system), a system's rank is 1 + the systems with
    a higher mean (ties share the better rank); the interval runs from the (1 - level) / 2 to the (1 + level) / 2
    quantile of those ranks, taken at ranks that occur.

    >>> rank_intervals({"a": [100.0] * 40, "b": [0.0, 100.0] * 20, "c": [0.0] * 40})
    {'a': (1, 1), 'b': (2, 2), 'c': (3, 3)}
    """
    if not columns:
        return {}
    means = paired_bootstrap_means(np.stack(list(columns.values()), axis=1), num_bootstrap, seed)
    # Closer than 1e-9 is a tie: sums of the same scores in another order may differ in their last digits.
    ranks = 1 + (means[:, None, :] > means[:, :, None] + 1e-9).sum(axis=2)
    tail = (1 - confidence_level) / 2
    low, high = np.quantile(ranks, tail, axis=0, method="lower"), np.quantile(ranks, 1 - tail, axis=0, method="higher")
    return {name: (int(lowest), int(highest)) for name, lowest, highest in zip(columns, low, high)}


def holm(p_values) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: the i-th smallest of m becomes the max over j <= i of
    min(1, (m - j + 1) p_(j)), which keeps the chance of any false rejection among the m tests at most the level.

    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    """
    p_values = np.asarray(p_values, dtype=float)
    order, adjusted = np.argsort(p_values, kind="stable"), np.empty(len(p_values))
    multipliers = len(p_values) - np.arange(len(p_values))
    adjusted[order] = np.maximum.accumulate(np.minimum(1.0, multipliers * p_values[order]))
    return adjusted.tolist()


def compute_board(split: Split, settings: dict, entries: list[tuple[dict, Path]]) -> dict:
    """The board of the stored `entries`: evaluate's results for all of them with the baselines, each system's metadata
    and rank interval (by F1), and each comparison's Holm-corrected p-value (within its metric's pairs)."""
    systems = [join_file(split, path, metadata["system"]) for metadata, path in entries]
    results = evaluate_systems(systems, split, settings, with_baselines=True)
    comparisons, adjusted = results["comparisons"], {}
    for metric in ("f1", "exact_match"):
        family = [index for index, comparison in enumerate(comparisons) if comparison["metric"] == metric]
        adjusted.update(zip(family, holm([comparisons[index]["p_value"] for index in family])))
    return {
        "results": results,
        "metadata": {metadata["system"]: metadata for metadata, _ in entries},
        "rank_intervals": rank_intervals({s.name: score_columns(s, split)["f1"] for s in systems}, **settings),
        "holm_p_values": [adjusted[index] for index in range(len(comparisons))],
    }
