"""The board's data: the store of submissions (a Hub dataset repo, or a local folder to try it), read only inside
itself, and the board computed from it by `fiberbench evaluate`'s code, with rank intervals and Holm-corrected p-values.

As the Hub's leaderboards keep their requests and results, each submission is a folder `submissions/SPLIT/ID/`: the
predictions file as sent, `results.json` (evaluate's, for that file alone) and `metadata.json` (name, link, how it
was run, the file's sha256). A submission is committed on top of the revision it was checked against; when another
came in meanwhile the commit is refused (`HeadMoved`) and the caller checks again on the new head, so neither is lost.
"""

import hashlib
import json
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import filelock
import numpy as np
from huggingface_hub import CommitOperationAdd, HfApi, snapshot_download
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

from fiberbench.errors import DataError, describe
from fiberbench.metric import paired_bootstrap_means
from fiberbench.metric.evaluate.predictions import Split
from fiberbench.metric.evaluate.results import compare_pairs, evaluate_systems
from fiberbench.outputs import atomic_folder

from .metadata import Refused, check_stored, name_key
from .submission import METADATA_FILE, HeadMoved, in_child, score_files

SUBMISSIONS = "submissions"
MAX_METADATA_BYTES = 2**16


@dataclass
class Entry:
    """A stored submission: its folder's name, its name as shown, its checked metadata and its predictions file."""

    id: str
    name: str
    metadata: dict
    path: Path

    @property
    def key(self) -> tuple[str, str]:
        return self.id, self.metadata["sha256"]


def read_entries(root: Path, split: str, within: Path) -> tuple[list[Entry], list[str]]:
    """The submissions for `split` under `root` (a store's folder or a snapshot), oldest first, and a line for each
    that cannot be shown. Files are read only inside `within` (no link is followed out of it); a submission whose
    name another shows already (or a reserved one) is shown with its id after its name: none is dropped."""
    entries, problems, shown = [], [], set()
    folder = root / SUBMISSIONS / split
    for submission in sorted(folder.iterdir()) if folder.is_dir() else []:
        if submission.name.startswith("."):  # a submission being written: a hidden staging folder
            continue
        try:
            if submission.is_symlink():
                raise DataError(f"{submission}: a link, not a submission folder of the store's own; remove it")
            metadata = _read_metadata(submission, within)
            path = _inside(submission / metadata["predictions"], within)
        except DataError as error:  # named within the store: the page shows it
            problems.append(describe(error).replace(f"{root}/", ""))
            continue
        key = name_key(metadata["system"])
        name = metadata["system"] if key not in shown else f"{metadata['system']} ({submission.name})"
        shown |= {key, name_key(name)}
        entries.append(Entry(submission.name, name, metadata, path))
    return entries, problems


def _inside(path: Path, within: Path) -> Path:
    if not path.resolve().is_relative_to(within.resolve()) or not path.is_file():
        raise DataError(f"{path}: not a file of the store's own (a link out of it, or missing)")
    return path


def _read_metadata(folder: Path, within: Path) -> dict:
    path = _inside(folder / METADATA_FILE, within)
    if path.stat().st_size > MAX_METADATA_BYTES:
        raise DataError(f"{path}: more than {MAX_METADATA_BYTES:,} bytes")
    try:
        return check_stored(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, RecursionError) as error:  # Refused and json's errors are ValueErrors
        problem = str(error) if isinstance(error, Refused) else f"not readable JSON ({error})"
        raise DataError(f"{path}: {problem}") from None


class LocalStore:
    """A store in a local folder; adding takes a file lock, so processes (or threads) adding at once take turns."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def describe(self) -> str:
        return f"the results folder {self.folder}"

    def create(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)

    def head(self, split: str) -> str:
        folder = self.folder / SUBMISSIONS / split
        names = "\n".join(sorted(path.name for path in folder.glob("[!.]*"))) if folder.is_dir() else ""
        return hashlib.sha256(names.encode()).hexdigest()

    def read(self, split: str, revision: str) -> tuple[list[Entry], list[str]]:
        return read_entries(self.folder, split, self.folder)

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

    def read(self, split: str, revision: str) -> tuple[list[Entry], list[str]]:
        root = Path(snapshot_download(self.repo_id, repo_type="dataset", revision=revision, token=self.api.token,
                                      allow_patterns=[f"{SUBMISSIONS}/{split}/**"]))
        return read_entries(root, split, root.parents[1])  # a snapshot's files link to the repo's cached blobs

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


class Board:
    """The board of a store, kept as the store grows: each submission is scored once and each pair compared once (a
    new submission costs its own scoring and its pairs with the others, never the others' again)."""

    def __init__(self, split: Split, settings: dict):
        self.split, self.settings = split, settings
        self.scored: dict[tuple, tuple | str] = {}  # entry key -> (evaluate's row, per-blank scores), or a problem
        self.pairs: dict[tuple, list] = {}  # (key a, key b), the better first -> the pair's comparisons
        self.base = evaluate_systems([], split, settings, with_baselines=True)  # the baselines, dataset and settings

    def update(self, entries: list[Entry], problems: list[str] = ()) -> dict:
        """The board of `entries`: evaluate's results for all of them with the baselines (comparisons in evaluate's
        order), each entry's metadata and rank interval (by F1), each comparison's Holm-corrected p-value (within its
        metric's pairs) and the lines of the stored submissions that cannot be shown."""
        new = [entry for entry in entries if entry.key not in self.scored]
        if new:
            files = [(entry.path, f"{entry.id}/{entry.path.name}", entry.metadata["sha256"]) for entry in new]
            outcomes = in_child(score_files, self.split, self.settings, files)
            self.scored.update(zip((entry.key for entry in new), outcomes))
        self.scored = {entry.key: self.scored[entry.key] for entry in entries}  # what left the store leaves memory
        problems = [*problems, *(outcome for outcome in self.scored.values() if isinstance(outcome, str))]
        ranked = sorted((entry for entry in entries if not isinstance(self.scored[entry.key], str)),
                        key=lambda entry: -self.scored[entry.key][0]["f1"])  # stable: ties in the store's order
        self.pairs = {(a, b): self.pairs.get((a, b)) or compare_pairs(
            {"a": self.scored[a][1], "b": self.scored[b][1]}, ["a", "b"], self.settings)
            for a, b in combinations([entry.key for entry in ranked], 2)}
        names = {entry.key: entry.name for entry in ranked}
        comparisons = [{**comparison, "systems": [names[a], names[b]]}
                       for (a, b), compared in self.pairs.items() for comparison in compared]
        systems = {entry.name: self.scored[entry.key][0] for entry in ranked}
        readings = {json.dumps(row["reading"], sort_keys=True) for row in systems.values() if row["reading"]}
        adjusted = {}
        for metric in ("f1", "exact_match"):
            family = [index for index, comparison in enumerate(comparisons) if comparison["metric"] == metric]
            adjusted.update(zip(family, holm([comparisons[index]["p_value"] for index in family])))
        return {
            "results": {**self.base, "systems": systems, "readings_differ": len(readings) > 1,
                        "comparisons": comparisons},
            "metadata": {entry.name: entry.metadata for entry in ranked},
            "rank_intervals": rank_intervals({e.name: self.scored[e.key][1]["f1"] for e in ranked}, **self.settings),
            "holm_p_values": [adjusted[index] for index in range(len(comparisons))],
            "problems": problems,
        }
