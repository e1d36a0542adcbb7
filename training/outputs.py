"""A run's output folder, which the run writes into only where it owns the entry, and its results table.

`RunFolder` is the training script's `fiberbench.ownership.Output`: its record,
`fiberbench_output.json` at the top of --output_dir, lists the entries the run wrote
(`results.json`, `predictions.jsonl`, `model/`, `step_N/` and the tracker's `logs/`, each folder
with its files) and says whether the run is `running` or `complete`. That list is what makes the
folder safe to reuse: a new run refuses a folder holding anything else, `--overwrite_output_dir`
removes only the files the previous run listed (a user's file in `logs/` stays, named in a
notice), a checkpoint or model is replaced only when the run wrote it, and `--push_to_hub`
uploads only the files listed for `model/`. Only the main process writes, and it holds the
folder's lock for the whole run (`Output.open`).
"""

import argparse
import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

from fiberbench.data import SAMPLE_DIR
from fiberbench.errors import UsageError
from fiberbench.files import atomic_folder
from fiberbench.ownership import (
    COMPLETE,
    RUNNING,
    Output,
    OutputRecord,
    files_in,
    names_pattern,
    remove_entries,
    unlisted_files,
)
from fiberbench.training.arguments import hub_checkpoint

RESULTS_FILE = "results.json"
PREDICTIONS_FILE = "predictions.jsonl"
MODEL_FOLDER = "model"
LOGS_FOLDER = "logs"
WRITTEN_BY = "training/train.py"
CHECKPOINT_NAMES = re.compile(r"(step|epoch)_\d+")
# The entries a run may write: a user's entry of another name is never touched.
RUN_ENTRY_NAMES = names_pattern(RESULTS_FILE, PREDICTIONS_FILE, MODEL_FOLDER, LOGS_FOLDER, CHECKPOINT_NAMES)


def last_checkpoint(output_dir: str) -> Path | None:
    """The checkpoint folder (`step_N/`, `epoch_N/`) saved last in a run's `output_dir`, which
    --resume_from_checkpoint continues; None when the run saved none (the main job saves none)."""
    folder = Path(output_dir)
    if not folder.is_dir():
        return None
    checkpoints = [entry for entry in folder.iterdir() if CHECKPOINT_NAMES.fullmatch(entry.name) and entry.is_dir()]
    # The newest, its number breaking a tie of times (a run resumed with other --checkpointing_steps holds both kinds).
    return max(checkpoints, key=lambda entry: (entry.stat().st_mtime, int(entry.name.split("_")[1])), default=None)


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
        output: the folder as an output of train.py.
        entries: entry name (relative to the folder) -> the files written in it (a folder's), or None (a file).
        inputs: what the folder is kept apart from (the dataset, model and config).
        resuming: the run continues a checkpoint of this folder.
    """

    def __init__(self, output: Output, entries: dict[str, list[str] | None], inputs: list, resuming: bool):
        self.output = output
        self.path = output.path
        self.entries = entries
        self.inputs = inputs
        self.resuming = resuming
        self.kept: dict[str, set[str]] = {}  # a user's files left in this run's folder entries (see `claim`)

    def open(self, accelerator):
        """`Output.open` of the folder, locked by the main process for the whole run; the run claims it (`claim`) once
        its data and model are read."""
        return self.output.open(
            self.inputs, resume=self.resuming, accelerator=accelerator, claim=self._claim, defer_claim=True
        )

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
        checkpoint = last_checkpoint(output_dir)
        output = Output.output_dir(
            output_dir,
            overwrite=overwrite,
            command=WRITTEN_BY,
            entry_names=RUN_ENTRY_NAMES,
            resume_hint=f"--resume_from_checkpoint {checkpoint} to continue it" if checkpoint else None,
            leaves_others=True,
            shared_entries=(LOGS_FOLDER,),
        )
        resuming = (
            resume_from_checkpoint is not None
            and Path(resume_from_checkpoint).resolve().parent == output.path.resolve()
        )
        previous = output.check(inputs, resume=resuming)
        return cls(output, dict(previous.entries) if previous is not None and resuming else {}, inputs, resuming)

    def claim(self) -> None:
        """Start writing (main process, holding the lock): see `_claim`."""
        self.output.claim()

    def _claim(self, previous: OutputRecord | None) -> None:
        """Remove the files the previous run listed if replacing it (a user's stay, named in a notice); list this
        run's, the record saying `running`."""
        self.path.mkdir(parents=True, exist_ok=True)
        if previous is not None and not self.resuming:
            kept = remove_entries(self.path, previous.entries)
            self.output.notice_kept(kept)
            for file in kept:
                name, relative = file.split("/", 1)
                self.kept.setdefault(name, set()).add(relative)
        self.write_marker()

    def write_marker(self, state: str = RUNNING) -> None:
        """The record: this run's entries; a folder it adds files to (`logs/`) with the files in it now, a user's left
        out."""
        for name in self.entries:
            folder = self.path / name
            if name in self.output.shared_entries and folder.is_dir() and not folder.is_symlink():
                self.entries[name] = [file for file in files_in(folder) if file not in self.kept.get(name, ())]
        self.output.write_record(state, entries=self.entries)

    def finish(self) -> None:
        """The run is over (main process): the record says `complete`."""
        self.write_marker(COMPLETE)

    def entry(self, name: str, files: list[str] | None = None) -> Path:
        """The path of entry `name`, listed as written by this run before anything is written there.

        Raises `UsageError` when something this run did not write has appeared under that name.
        """
        path = self.path / name
        if name not in self.entries:
            if path.exists() and name not in self.kept:
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
        foreign = unlisted_files(path, self.entries[name])
        if foreign:
            raise UsageError(
                f"{self.path} holds {', '.join(foreign[:5])}, which {WRITTEN_BY} did not write; it is neither "
                "replaced nor pushed. Move those files away and run again."
            )
        with atomic_folder(path, replace=True) as staging:
            yield staging
            files = sorted(file.relative_to(staging).as_posix() for file in staging.rglob("*") if file.is_file())
        self.entry(name, files)

    def add_file(self, folder: str, file_name: str) -> Path:
        """List `folder/file_name` among the files of folder entry `folder`; returns its path to write."""
        self.entry(folder, sorted({*self.files_of(folder), file_name}))
        return self.path / folder / file_name


def check_output_dir(args: argparse.Namespace) -> RunFolder:
    """`train.py`'s --output_dir as a `RunFolder`, if this run may write into it (`RunFolder.check`); read on every
    process before torch and the other heavy libraries load, so that a refused folder is said at once."""
    # A Hub checkpoint is an input, downloaded into the cache: the folder is checked as a new run's.
    return RunFolder.check(
        args.output_dir,
        overwrite=args.overwrite_output_dir,
        resume_from_checkpoint=None if hub_checkpoint(args) else args.resume_from_checkpoint,
        inputs=[
            path
            for path in (args.dataset_name or SAMPLE_DIR, args.model_name_or_path, args.config_path)
            if path is not None and Path(path).exists()
        ],
    )


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
