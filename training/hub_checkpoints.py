"""Checkpoints on the Hub: `HubPusher` pushes each save in the background (--hub_strategy), and
`download_checkpoint` brings one back to resume from (--resume_from_checkpoint REPO_ID[:FOLDER]).

The strategies are the Trainer's `hub_strategy`:
- `end`: the final model, once, when the run is over;
- `every_save`: also the model (`model/`, the best so far) and its card at each save;
- `checkpoint`: also the latest checkpoint, in the repo's `last-checkpoint/` folder, which
  `--resume_from_checkpoint REPO_ID` resumes on another machine;
- `all_checkpoints`: also every checkpoint, each in a folder of its own name (`step_30/`).

A push never holds up training: the files of a save are hard-linked into a staging folder of the
run when it is made (`stage_files`: a link keeps what the file held when the next save replaces
the folder) and committed by `huggingface_hub`'s `run_as_future`, one push at a time, in order;
the staging folder is removed when the push ends (after a kill, by the next run in the folder).
A save made while another push is queued replaces the queued one, which would only have pushed
older files. Only files this run wrote and listed in its record are pushed. A push that fails is
logged in one line; the next save pushes again, with everything not yet on the Hub. The final push
(`push_final`) waits for the others, then pushes the final model (and any checkpoint still
missing) and raises if it fails.

A checkpoint on the Hub is downloaded into the Hugging Face cache (by every process;
`check_downloaded` makes sure they got the same commit), never into the run's output
folder (it is an input of the run, like a model): only the files a resume reads without running
code (`checkpointing.is_trusted_file`), all from one commit, each checked against the size the Hub
lists; a pickle train.py never writes refuses the checkpoint before anything is downloaded. The
run then checks and loads the folder as it does a local checkpoint.
"""

import dataclasses
import logging
import os
import shutil
from concurrent.futures import Future
from pathlib import Path

from accelerate import Accelerator
from accelerate.utils import gather_object
from huggingface_hub import HfApi, RepoFile, hf_hub_download
from huggingface_hub.errors import EntryNotFoundError

from fiberbench.errors import DataError
from fiberbench.files import remove_stale_staging, staging_folder
from fiberbench.hub import HubPushError, push_files, stage_files
from fiberbench.training.arguments import LAST_CHECKPOINT, HubCheckpoint
from fiberbench.training.checkpointing import PROGRESS_FILE, CheckpointError, is_trusted_file, refuse_untrusted
from fiberbench.training.outputs import MODEL_FOLDER, RunFolder

logger = logging.getLogger(__name__)

FINAL_COMMIT_MESSAGE = "FIBER model trained with fiberbench"
# The staging folders of the pushes are hidden folders named after this entry (never one of the run's entries).
STAGING_NAME = "hub-push"


@dataclasses.dataclass
class Push:
    """One push in the background: its future, its staging folder, and the checkpoints it carries."""

    future: Future
    staging: Path
    checkpoints: list[str]


class HubPusher:
    """The pushes of one run to its Hub repo, as --hub_strategy says (main process only).

    Args:
        output: the run folder; only the files it lists as this run's are pushed.
        repo_id: the repo (created at the first push if needed).
        strategy: "end", "every_save", "checkpoint" or "all_checkpoints".
        token: a Hub token (default: HF_TOKEN or the saved login).
    """

    def __init__(self, output: RunFolder, repo_id: str, strategy: str, token: str | None = None):
        self.output = output
        self.repo_id = repo_id
        self.strategy = strategy
        self.token = token
        # Its `run_as_future` runs the pushes in one background thread, one after the other.
        self.api = HfApi(token=token)
        self.pushes: list[Push] = []
        # The checkpoints to push that are not on the Hub yet, oldest first (the latest only, for `checkpoint`).
        self.unpushed: list[str] = []
        self.staging_path = self.output.path / STAGING_NAME

    def push(self, checkpoint: str | None, description: str) -> None:
        """After a save (`checkpoint`: the checkpoint folder it wrote, if any): push it in the background.

        Returns at once; `description` ("step 30") names the push in its commit message and in the log.
        """
        if self.strategy == "end":
            return
        if checkpoint is not None and self.strategy == "all_checkpoints":
            self.unpushed = [*self.unpushed, checkpoint]
        elif checkpoint is not None and self.strategy == "checkpoint":
            self.unpushed = [checkpoint]
        self._settle()
        for queued in self.pushes:
            # Not started yet: this push carries all it would have.
            if queued.future.cancel():
                shutil.rmtree(queued.staging, ignore_errors=True)
        self.pushes = [push for push in self.pushes if not push.future.cancelled()]
        staging = staging_folder(self.staging_path)
        try:
            files, checkpoints = self._stage(staging)
        except (HubPushError, OSError) as error:
            shutil.rmtree(staging, ignore_errors=True)
            log_failure(description, error)
            return
        future = self.api.run_as_future(self._push_in_background, files, staging, description, bool(checkpoints))
        self.pushes.append(Push(future, staging, checkpoints))

    def push_final(self) -> str:
        """Wait for the pushes in the background, then push the final model (and the checkpoints not on the Hub yet).

        Returns the repo URL; raises `HubPushError` (one line) when the final push fails.
        """
        if any(not push.future.done() for push in self.pushes):
            logger.info("Waiting for the pushes to the Hub still under way")
        for push in self.pushes:
            push.future.exception()  # waits; a failure was logged in the pushing thread
        self._settle()
        staging = staging_folder(self.staging_path)
        try:
            files, _ = self._stage(staging)
            return push_files(
                files,
                self.repo_id,
                token=self.token,
                commit_message=FINAL_COMMIT_MESSAGE,
                source=f"the model of {self.output.path}",
                replace_folders=self._replaced(bool(self.unpushed)),
            )
        except HubPushError as error:
            raise HubPushError(f"{error} (the run's outputs in {self.output.path} are complete)") from error
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def close(self) -> None:
        """Cancel the pushes not started yet (a run that stops early); one under way goes on to its end."""
        for push in self.pushes:
            if push.future.cancel():
                shutil.rmtree(push.staging, ignore_errors=True)

    def _replaced(self, checkpoint: bool) -> list[str]:
        """The repo folders a push replaces whole: last-checkpoint/ when it carries a checkpoint there."""
        return [LAST_CHECKPOINT] if checkpoint and self.strategy == "checkpoint" else []

    def _stage(self, staging: Path) -> tuple[dict[str, Path], list[str]]:
        """Stage what a push sends now, as the repo lays it out: the model's files and the checkpoints not on the
        Hub yet; returns the files and those checkpoints."""
        checkpoints = list(self.unpushed)
        files = stage_files(self.output.path / MODEL_FOLDER, self.output.files_of(MODEL_FOLDER), staging)
        for name in checkpoints:
            folder = LAST_CHECKPOINT if self.strategy == "checkpoint" else name
            files |= stage_files(self.output.path / name, self.output.files_of(name), staging, prefix=f"{folder}/")
        return files, checkpoints

    def _push_in_background(self, files: dict[str, Path], staging: Path, description: str, checkpoint: bool) -> str:
        """One push, in the pushing thread: commit the staged files (`checkpoint`: with a checkpoint), log a failure in
        one line, remove the staging."""
        try:
            return push_files(
                files,
                self.repo_id,
                token=self.token,
                commit_message=f"Training in progress, {description}",
                source=f"{description} of {self.output.path}",
                replace_folders=self._replaced(checkpoint),
            )
        except Exception as error:
            log_failure(description, error)
            raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _settle(self) -> None:
        """Forget the pushes that ended; the checkpoints of those that succeeded are on the Hub."""
        for push in [push for push in self.pushes if push.future.done()]:
            if not push.future.cancelled() and push.future.exception() is None:
                self.unpushed = [name for name in self.unpushed if name not in push.checkpoints]
        self.pushes = [push for push in self.pushes if not push.future.done()]


def remove_stale_pushes(output: RunFolder) -> None:
    """Remove the staging folders that pushes of killed runs left in the run folder (they hold on to old files)."""
    remove_stale_staging(output.path / STAGING_NAME)


def log_failure(description: str, error: BaseException) -> None:
    """The one log line of a push that failed during training."""
    problem = " ".join(str(error).split()) if isinstance(error, HubPushError | OSError) else repr(error)
    logger.warning(f"The push of {description} failed; training goes on and the next save pushes again: {problem}")


@dataclasses.dataclass(frozen=True)
class DownloadedCheckpoint:
    """A Hub checkpoint in the local cache: its folder, the commit it came from, and the files left out."""

    path: Path
    commit: str
    skipped: list[str]


def download_checkpoint(source: HubCheckpoint, *, trust_checkpoint: bool = False) -> DownloadedCheckpoint:
    """Download the checkpoint's trusted files, all from one commit, into the Hugging Face cache; check their sizes.

    Raises a `DataError` when the repo, revision or folder cannot be found or the Hub cannot be
    reached, and a `CheckpointError` for a checkpoint that must not be read (a pickle train.py
    never writes; a sharded checkpoint without `trust_checkpoint`) or that did not download whole.
    Safe to run in every process of a run at once: the cache locks each file it downloads.
    """
    source.check()
    api = HfApi()
    try:
        commit = api.repo_info(source.repo_id, revision=source.revision).sha
        listing = list(api.list_repo_tree(source.repo_id, source.folder, recursive=True, revision=commit))
    except EntryNotFoundError as error:
        raise DataError(f"--resume_from_checkpoint {source}: the repo has no folder {source.folder!r}") from error
    sizes = {
        entry.path.removeprefix(f"{source.folder}/"): entry.size for entry in listing if isinstance(entry, RepoFile)
    }
    if PROGRESS_FILE not in sizes:
        raise CheckpointError(f"{source}: not a checkpoint of train.py (no {PROGRESS_FILE}).")
    trusted = {relative: is_trusted_file(relative, trust_checkpoint=trust_checkpoint) for relative in sorted(sizes)}
    for relative, verdict in trusted.items():
        if verdict is False:
            refuse_untrusted(source, relative, trust_checkpoint=trust_checkpoint)
    for relative in [relative for relative, verdict in trusted.items() if verdict]:
        try:
            local = hf_hub_download(source.repo_id, f"{source.folder}/{relative}", revision=commit)
        # The client's errors (HTTP, connection, a file that does not match its headers) share no base class.
        except Exception as error:  # noqa: BLE001
            raise DataError(
                f"Could not download {relative} of {source}: {type(error).__name__}: {' '.join(str(error).split())}"
            ) from error
        if os.path.getsize(local) != sizes[relative]:
            raise CheckpointError(
                f"{source}/{relative}: downloaded {os.path.getsize(local)} bytes, the Hub lists {sizes[relative]}"
            )
    folder = Path(hf_hub_download(source.repo_id, f"{source.folder}/{PROGRESS_FILE}", revision=commit)).parent
    return DownloadedCheckpoint(folder, commit, [relative for relative, verdict in trusted.items() if verdict is None])


def check_downloaded(accelerator: Accelerator, downloaded: DownloadedCheckpoint) -> None:
    """Refuse to resume when the processes downloaded a Hub checkpoint from different commits (a push in between);
    log the files the download left out (main process). Called on every process."""
    commits = sorted(set(gather_object([downloaded.commit])))
    if len(commits) > 1:
        raise CheckpointError(
            f"The processes downloaded --resume_from_checkpoint from different commits ({', '.join(commits)}): the "
            f"repo changed meanwhile; resume with --hub_revision {commits[0]} (or another of them)."
        )
    if downloaded.skipped and accelerator.is_main_process:
        logger.info(f"Left out of the download, as a resume does not read them: {', '.join(downloaded.skipped)}")
