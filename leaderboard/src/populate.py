"""The store of submissions (a Hub dataset repo, or a local folder), read only inside itself, one folder
`submissions/SPLIT/ID/` per submission (its files, evaluate's results.json, metadata.json), and the board computed from
it with `fiberbench evaluate`'s statistics."""

import hashlib
import json
from itertools import combinations
from pathlib import Path
from typing import NamedTuple

import filelock
import numpy as np
from huggingface_hub import CommitOperationAdd, HfApi, snapshot_download
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

from fiberbench.errors import DataError, describe
from fiberbench.metric import holm, minimum_detectable_difference, rank_intervals
from fiberbench.metric.evaluate.predictions import Split
from fiberbench.metric.evaluate.results import COMPARED, compare_pairs, evaluate_systems
from fiberbench.outputs import atomic_folder

from .metadata import Refused, check_stored, name_key
from .submission import METADATA_FILE, HeadMoved, in_child, score_files

SUBMISSIONS, MAX_METADATA_BYTES = "submissions", 2**16


class Entry(NamedTuple):
    """A stored submission: its folder's name, its name as shown, its checked metadata, its files (control or None)."""

    id: str
    name: str
    metadata: dict
    path: Path
    control: Path | None

    @property
    def key(self) -> tuple[str, str]:
        return self.id, self.metadata["sha256"]


def read_entries(root: Path, split: str, within: Path) -> tuple[list[Entry], list[str]]:
    """The submissions for `split` under `root`, oldest first, read only inside `within` (no link followed out), and a
    line for each that cannot be shown; a name shown already is shown again with the folder's name: none is dropped."""
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
            control = _inside(submission / metadata["control"], within) if "control" in metadata else None
        except DataError as error:  # named within the store: the page shows it
            problems.append(describe(error).replace(f"{root}/", ""))
            continue
        key = name_key(metadata["system"])
        name = metadata["system"] if key not in shown else f"{metadata['system']} ({submission.name})"
        shown |= {key, name_key(name)}
        entries.append(Entry(submission.name, name, metadata, path, control))
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


class Board:
    """The board of a store, kept as it grows: each submission scored once and each pair compared once, on the blanks
    both answered; Holm's correction and the ranks drawn from those comparisons as `fiberbench evaluate` draws them."""

    def __init__(self, split: Split, settings: dict):
        self.split, self.settings = split, settings
        self.scored: dict[tuple, tuple | str] = {}  # entry key -> (evaluate's row, scores, answered), or a problem
        self.pairs: dict[tuple, dict] = {}  # (key a, key b), the better first -> metric -> the pair's comparison
        self.base = evaluate_systems([], split, settings, with_baselines=True)  # the baselines, dataset and settings

    def compare(self, a: tuple, b: tuple) -> dict:
        (_, scores_a, answered_a), (_, scores_b, answered_b) = self.scored[a], self.scored[b]
        both = answered_a & answered_b
        compared = compare_pairs({"a": scores_a, "b": scores_b}, ["a", "b"], both, self.settings)
        return {comparison["metric"]: {**comparison, "blanks": int(both.sum())} for comparison in compared}

    def update(self, entries: list[Entry], problems: list[str] = ()) -> dict:
        """The board of `entries`: evaluate's results for them with the baselines (`blanks` added to each comparison),
        each one's metadata and the lines of the stored submissions that cannot be shown."""
        new = [entry for entry in entries if entry.key not in self.scored]
        if new:
            files = [(entry.path, f"{entry.id}/{entry.path.name}", entry.metadata["sha256"], entry.control and (
                entry.control, f"{entry.id}/{entry.control.name}", entry.metadata["control_sha256"])) for entry in new]
            outcomes = in_child(score_files, self.split, self.settings, files)
            self.scored.update(zip((entry.key for entry in new), outcomes))
        self.scored = {entry.key: self.scored[entry.key] for entry in entries}  # what left the store leaves memory
        problems = [*problems, *(outcome for outcome in self.scored.values() if isinstance(outcome, str))]
        ranked = sorted((entry for entry in entries if not isinstance(self.scored[entry.key], str)),
                        key=lambda entry: -self.scored[entry.key][0]["f1"])  # stable: ties in the store's order
        keys, names = [entry.key for entry in ranked], {entry.key: entry.name for entry in ranked}
        self.pairs = {(a, b): self.pairs.get((a, b)) or self.compare(a, b) for a, b in combinations(keys, 2)}
        comparisons = []
        for metric in COMPARED:  # in evaluate's order, Holm's correction within each metric's pairs
            family = [{**compared[metric], "systems": [names[a], names[b]]} for (a, b), compared in self.pairs.items()]
            for comparison, adjusted in zip(family, holm([comparison["p_value"] for comparison in family])):
                comparisons.append({**comparison, "p_value_holm": adjusted})
        systems = {names[key]: self.scored[key][0] for key in keys}
        # A pair decides the ranks only where its difference, on the blanks both answered, has the sign of the order.
        decided = {tuple(c["systems"]): c["p_value_holm"] if c["difference"] > 0 else 1.0 for c in comparisons
                   if c["metric"] == "f1"}
        intervals = rank_intervals({name: row["f1"] for name, row in systems.items()}, decided)
        common = np.logical_and.reduce([np.ones(len(self.split.keys), bool), *(self.scored[key][2] for key in keys)])
        readings = {json.dumps(row["reading"], sort_keys=True) for row in systems.values() if row["reading"]}
        results = {
            **self.base,
            "systems": {name: {**row, "rank": rank, "rank_interval": list(intervals[name])}
                        for rank, (name, row) in enumerate(systems.items(), start=1)},
            "readings_differ": len(readings) > 1,
            "compared_blanks": int(common.sum()),
            "clips_differ": len({row["coverage"]["clips_fingerprint"] for row in systems.values()}) > 1,
            "minimum_detectable_difference": {metric: minimum_detectable_difference(
                np.array([self.scored[key][1][metric][common] for key in keys]).T) for metric in COMPARED},
            "comparisons": comparisons,
        }
        return {"results": results, "metadata": {entry.name: entry.metadata for entry in ranked}, "problems": problems}
