"""Checkpoints on the Hub while a run trains: `HubPusher` pushes each save in the background (--hub_strategy).

The strategies are the Trainer's `hub_strategy`:
- `end`: the final model, once, when the run is over;
- `every_save`: also the model (`model/`, the best so far) and its card at each save;
- `checkpoint`: also the latest checkpoint, in the repo's `last-checkpoint/` folder, which
  `--resume_from_checkpoint REPO_ID` resumes on another machine;
- `all_checkpoints`: also every checkpoint, each in a folder of its own name (`step_30/`).

A push never holds up training: the files of a save are hard-linked into a staging folder of the
run when it is made (`stage_files`: a link keeps what the file held when the next save replaces
the folder) and committed by `huggingface_hub`'s `run_as_future`, one push at a time, in order;
the staging folder is removed when the push ends (after a kill, by the next run in the folder). A save made while another push
is queued replaces the queued one, which would only have pushed older files. Only files this run
wrote and listed in its record are pushed. A push that fails is logged in one line; the next save
pushes again, with everything not yet on the Hub. The final push (`push_final`) waits for the
others, then pushes the final model (and any checkpoint still missing) and raises if it fails.
"""

import dataclasses
import logging
import shutil
from concurrent.futures import Future
from pathlib import Path

from huggingface_hub import HfApi

from fiberbench.files import remove_stale_staging, staging_folder
from fiberbench.hub import HubPushError, push_files, stage_files
from fiberbench.training.outputs import MODEL_FOLDER, RunFolder

logger = logging.getLogger(__name__)

# The repo folder of the latest checkpoint with --hub_strategy checkpoint (the Trainer's name).
LAST_CHECKPOINT = "last-checkpoint"
FINAL_COMMIT_MESSAGE = "FIBER model trained with fiberbench"
# The staging folders of the pushes are hidden folders named after this entry (never one of the run's entries).
STAGING_NAME = "hub-push"


@dataclasses.dataclass
class Push:
    """One push in the background: its future, its staging folder, and the checkpoints it carries."""

    future: Future
    staging: Path
    checkpoints: list[str]
    description: str


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
        remove_stale_staging(self.staging_path)

    @property
    def staging_path(self) -> Path:
        return self.output.path / STAGING_NAME

    @property
    def pushes_checkpoints(self) -> bool:
        return self.strategy in ("checkpoint", "all_checkpoints")

    def push(self, checkpoint: str | None, description: str) -> None:
        """After a save (`checkpoint`: the checkpoint folder it wrote, if any): push it in the background.

        Returns at once; `description` ("step 30") names the push in its commit message and in the log.
        """
        if self.strategy == "end":
            return
        if checkpoint is not None and self.pushes_checkpoints:
            self.unpushed = [*self.unpushed, checkpoint] if self.strategy == "all_checkpoints" else [checkpoint]
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
            logger.warning(f"The push of {description} failed; training goes on and the next save pushes again: {error}")
            return
        future = self.api.run_as_future(self._push_in_background, files, staging, description)
        self.pushes.append(Push(future, staging, checkpoints, description))

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
                replace_folders=[LAST_CHECKPOINT] if self.strategy == "checkpoint" and self.unpushed else [],
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

    def _stage(self, staging: Path) -> tuple[dict[str, Path], list[str]]:
        """Stage what a push sends now, as the repo lays it out: the model's files and the checkpoints not on the
        Hub yet; returns the files and those checkpoints."""
        checkpoints = list(self.unpushed)
        files = stage_files(self.output.path / MODEL_FOLDER, self.output.files_of(MODEL_FOLDER), staging)
        for name in checkpoints:
            folder = LAST_CHECKPOINT if self.strategy == "checkpoint" else name
            files |= stage_files(self.output.path / name, self.output.files_of(name), staging, prefix=f"{folder}/")
        return files, checkpoints

    def _push_in_background(self, files: dict[str, Path], staging: Path, description: str) -> str:
        """One push, in the pushing thread: commit the staged files, log a failure in one line, remove the staging."""
        try:
            return push_files(
                files,
                self.repo_id,
                token=self.token,
                commit_message=f"Training in progress, {description}",
                source=f"{description} of {self.output.path}",
                replace_folders=[LAST_CHECKPOINT] if self.strategy == "checkpoint" else [],
            )
        except Exception as error:
            problem = " ".join(str(error).split()) if isinstance(error, HubPushError) else repr(error)
            logger.warning(f"The push of {description} failed; training goes on and the next save pushes again: {problem}")
            raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _settle(self) -> None:
        """Forget the pushes that ended; the checkpoints of those that succeeded are on the Hub."""
        for push in [push for push in self.pushes if push.future.done()]:
            if not push.future.cancelled() and push.future.exception() is None:
                self.unpushed = [name for name in self.unpushed if name not in push.checkpoints]
        self.pushes = [push for push in self.pushes if not push.future.done()]
