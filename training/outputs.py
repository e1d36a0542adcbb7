"""A run's output folder, which the run writes into only where it owns the entry, and its results table.

`RunFolder` keeps, in `fiberbench_run.json` at the top of --output_dir, the list of entries the
run wrote (`results.json`, `predictions.jsonl`, `model/` with its files, `step_N/`, the tracker's
logs). That list is what makes the folder safe to reuse: a new run refuses a folder holding
anything else, `--overwrite_output_dir` removes only the listed entries of the previous run, a
checkpoint or model is replaced only when the run wrote it, and `--push_to_hub` uploads only the
files listed for `model/`. Only the main process writes.
"""

import contextlib
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

from fiberbench import __version__
from fiberbench.errors import DataError, UsageError
from fiberbench.files import atomic_folder, check_outputs_apart, remove_stale_staging, write_json

RESULTS_FILE = "results.json"
PREDICTIONS_FILE = "predictions.jsonl"
MODEL_FOLDER = "model"
RUN_MARKER = "fiberbench_run.json"
WRITTEN_BY = "fiberbench training/train.py"
# The entries a run may write: a user's entry of one of these names is never touched.
RUN_ENTRY_NAMES = re.compile(
    rf"^({re.escape(RESULTS_FILE)}|{re.escape(PREDICTIONS_FILE)}|{MODEL_FOLDER}|(step|epoch)_\d+)$"
)


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as file:
        return [json.loads(line) for line in file if line.strip()]


def read_run_outputs(output_dir: Path) -> tuple[dict, list[dict]]:
    """A finished run's results.json and the records of its predictions.jsonl."""
    results = json.loads((Path(output_dir) / RESULTS_FILE).read_text(encoding="utf-8"))
    return results, read_jsonl(Path(output_dir) / PREDICTIONS_FILE)


class RunFolder:
    """--output_dir of one run: the entries it wrote (see the module docstring), checked before any work.

    Args:
        path: the output folder.
        entries: entry name (relative to `path`) -> the files written in it (for folders whose
            files are pushed, e.g. `model`), or None.
        previous_entries: with --overwrite_output_dir, the previous run's entries, removed by `claim`.
    """

    def __init__(self, path: Path, entries: dict[str, list[str] | None], previous_entries: list[str]):
        self.path = path
        self.entries = entries
        self.previous_entries = previous_entries

    @classmethod
    def check(
        cls,
        output_dir: str,
        *,
        overwrite: bool,
        resume_from_checkpoint: str | None,
        inputs: list[str | None],
    ) -> "RunFolder":
        """The run folder, if this run may write into `output_dir`; else a `UsageError` saying what to do.

        Reads only: safe on every process. Accepted: a new or empty folder; a previous run's
        folder with `overwrite` (its entries are replaced) or with a checkpoint of it to resume.
        Refused: a folder holding anything this script did not write, and an output folder that
        is, holds or lies inside one of `inputs` (the dataset folder, the model folder, ...).
        """
        path = Path(output_dir)
        check_outputs_apart({"--output_dir": path}, inputs)
        if path.exists() and not path.is_dir():
            raise UsageError(f"--output_dir {path} is a file, not a folder.")
        found = sorted(entry.name for entry in path.iterdir()) if path.is_dir() else []
        if not found:
            return cls(path, {}, [])
        entries = read_marker(path) if RUN_MARKER in found else None
        if entries is None:
            shown = ", ".join(found[:5]) + (", ..." if len(found) > 5 else "")
            raise UsageError(
                f"--output_dir {path} is not empty and holds no run of train.py ({shown}); nothing in it is "
                "replaced, even with --overwrite_output_dir: choose a new or empty folder."
            )
        foreign = [name for name in found if RUN_ENTRY_NAMES.match(name) and name not in entries]
        if foreign:
            raise UsageError(
                f"--output_dir {path} holds {', '.join(foreign)}, which no run of train.py wrote; "
                "move it away or choose another folder (this script never replaces what it did not write)."
            )
        for name, files in entries.items():
            check_only_listed(path / name, files)
        resuming = (
            resume_from_checkpoint is not None and Path(resume_from_checkpoint).resolve().parent == path.resolve()
        )
        if resuming:
            return cls(path, entries, [])
        if overwrite:
            return cls(path, {}, sorted(entries))
        raise UsageError(
            f"--output_dir {path} holds a previous run ({RUN_MARKER}): pass --overwrite_output_dir to replace "
            f"its outputs, --resume_from_checkpoint {path}/step_N to continue it, or choose another folder."
        )

    def claim(self) -> None:
        """Start writing (main process only): remove the previous run's entries if replacing it; list this run's."""
        self.path.mkdir(parents=True, exist_ok=True)
        for name in self.previous_entries:
            entry = self.path / name
            remove_stale_staging(entry)
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink(missing_ok=True)
        self.write_marker()

    def write_marker(self) -> None:
        write_json(
            self.path / RUN_MARKER,
            {"written_by": WRITTEN_BY, "fiberbench_version": __version__, "entries": self.entries},
        )

    def entry(self, name: str, files: list[str] | None = None) -> Path:
        """The path of entry `name`, listed as written by this run before anything is written there.

        Raises `UsageError` when something this run did not write has appeared under that name.
        """
        path = self.path / name
        if name not in self.entries:
            if path.exists():
                raise UsageError(f"{path} appeared during the run and was not written by it; it is left as it is.")
            self.entries[name] = files
            self.write_marker()
        elif files is not None and files != self.entries[name]:
            self.entries[name] = files
            self.write_marker()
        return path

    def files_of(self, name: str) -> list[str]:
        """The files this run wrote in folder entry `name` (what a push uploads)."""
        return list(self.entries.get(name) or [])

    @contextlib.contextmanager
    def atomic_entry(self, name: str) -> Iterator[Path]:
        """A staging folder that replaces folder entry `name` when the block succeeds (see `atomic_folder`).

        The previous folder stays whole until the new one is complete, so a run killed while saving
        leaves the previous model or checkpoint loadable. The files written become the entry's list.
        """
        path = self.entry(name)
        check_only_listed(path, self.entries[name])
        with atomic_folder(path, replace=True) as staging:
            yield staging
            files = sorted(file.relative_to(staging).as_posix() for file in staging.rglob("*") if file.is_file())
        self.entry(name, files)

    def add_file(self, folder: str, file_name: str) -> Path:
        """List `folder/file_name` among the files of folder entry `folder`; returns its path to write."""
        self.entry(folder, sorted({*self.files_of(folder), file_name}))
        return self.path / folder / file_name


def check_only_listed(path: Path, files: list[str] | None) -> None:
    """A `UsageError` when folder entry `path` holds files other than `files`, those a run wrote there.

    None means the run was stopped before it could list the files it had just published: trusted.
    """
    if files is None or not path.is_dir() or path.is_symlink():
        return
    listed = set(files)
    foreign = sorted(
        relative
        for relative in (file.relative_to(path).as_posix() for file in path.rglob("*") if not file.is_dir())
        if relative not in listed
    )
    if foreign:
        raise UsageError(
            f"{path} holds {', '.join(foreign[:5])}, which no run of train.py wrote; it is neither replaced nor "
            "pushed. Move those files away and run again."
        )


def read_marker(path: Path) -> dict[str, list[str] | None]:
    """The entries listed in `path`'s run marker (a `DataError` if it is not one this script wrote)."""
    marker = path / RUN_MARKER
    try:
        content = json.loads(marker.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DataError(f"{marker}: not a run marker of train.py ({error}); move the folder away.") from error
    entries = content.get("entries") if isinstance(content, dict) else None
    if (
        not isinstance(content, dict)
        or content.get("written_by") != WRITTEN_BY
        or not isinstance(entries, dict)
        or not all(
            isinstance(name, str)
            and "/" not in name
            and name not in ("", ".", "..")
            and (files is None or (isinstance(files, list) and all(isinstance(file, str) for file in files)))
            for name, files in entries.items()
        )
    ):
        raise DataError(f"{marker}: not a run marker of train.py (field written_by or entries); move the folder away.")
    return entries


TABLE_COLUMNS = (
    ("EM", "exact_match"),
    ("F1", "f1"),
    ("EM label", "exact_match_label_only"),
    ("F1 label", "f1_label_only"),
    ("C@1", ("correct_at_k", "1")),
    ("MAP", "map"),
    ("P(label)", "label_probability"),
)


def _cell(metrics: dict, key: str | tuple[str, str]) -> str:
    value = metrics.get(key[0], {}).get(key[1]) if isinstance(key, tuple) else metrics.get(key)
    if value is None:
        return "-"
    return f"{value:.3f}" if key == "label_probability" else f"{value:.1f}"


def format_results_table(title: str, splits: dict[str, dict]) -> str:
    """A Markdown table with one row per evaluated split (EM/F1 in %, P(label) in 0-1)."""
    header = ["split", "n"] + [name for name, _ in TABLE_COLUMNS]
    rows = [
        [split, str(metrics["num_examples"])] + [_cell(metrics, key) for _, key in TABLE_COLUMNS]
        for split, metrics in splits.items()
    ]
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
    lines = [title, "| " + " | ".join(cell.ljust(width) for cell, width in zip(header, widths)) + " |"]
    lines.append("|" + "|".join("-" * (width + 2) for width in widths) + "|")
    lines += ["| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths)) + " |" for row in rows]
    return "\n".join(lines)
