"""Checkpoints on the Hub: HubPusher's background pushes of a run's own files, and download_checkpoint."""

import logging
import os
import pickle
import socket
import threading

import pytest
from huggingface_hub import HfApi

from fiberbench.errors import DataError
from fiberbench.hub import HubPushError, push_files
from fiberbench.training.checkpointing import CheckpointError
from fiberbench.training.arguments import LAST_CHECKPOINT, HubCheckpoint
from fiberbench.training.hub_checkpoints import HubPusher, download_checkpoint, remove_stale_pushes
from fiberbench.training.outputs import RunFolder

REPO_ID = "fiber-org/run"


@pytest.fixture
def run_folder(tmp_path):
    """A run folder as train.py writes it: a model and one checkpoint, listed in its record."""
    run = RunFolder.check(str(tmp_path / "run"), overwrite=False, resume_from_checkpoint=None, inputs=[])
    with run.open(None):
        run.claim()
        save(run, "model", {"config.json": "{}", "model.safetensors": "weights 1"})
        save(run, "step_2", {"model.safetensors": "weights 1", "training_progress.json": '{"completed_steps": 2}'})
    return run


def save(run: RunFolder, entry: str, files: dict[str, str]) -> None:
    """Write folder entry `entry` of the run as train.py does: staged, then renamed into place."""
    with run.atomic_entry(entry) as staging:
        for name, content in files.items():
            (staging / name).write_text(content, encoding="utf-8")


def head_files(hub, repo_id: str = REPO_ID) -> dict[str, str]:
    """The files at the head of the repo's main branch, with their text."""
    commit = hub.store.repos[("model", repo_id)].resolve("main")
    return {path: hub.store.read_blob(stored.sha256).decode() for path, stored in commit.files.items()}


def titles(hub, repo_id: str = REPO_ID) -> list[str]:
    """The repo's commit titles, oldest first."""
    return [commit.title for commit in hub.history(repo_id)]


def wait(pusher: HubPusher) -> None:
    for push in pusher.pushes:
        push.future.exception()


@pytest.fixture
def held(run_folder):
    """`held(pusher)`: occupy the pusher's background thread until the returned event is set (pushes queue)."""

    def hold(pusher: HubPusher) -> threading.Event:
        release = threading.Event()
        pusher.api.run_as_future(release.wait, 60)
        return release

    return hold


def test_checkpoint_strategy_pushes_the_model_and_last_checkpoint_of_the_runs_own_files(hub_server, run_folder):
    (run_folder.path / "model" / "notes.txt").write_text("not the run's", encoding="utf-8")
    pusher = HubPusher(run_folder, REPO_ID, "checkpoint")
    pusher.push("step_2", "step 2")
    wait(pusher)
    assert head_files(hub_server) == {
        ".gitattributes": head_files(hub_server)[".gitattributes"],
        "config.json": "{}",
        "model.safetensors": "weights 1",
        f"{LAST_CHECKPOINT}/model.safetensors": "weights 1",
        f"{LAST_CHECKPOINT}/training_progress.json": '{"completed_steps": 2}',
    }
    # The next checkpoint replaces last-checkpoint/ whole: a file only the older one had goes.
    save(run_folder, "step_4", {"model.safetensors": "weights 2"})
    pusher.push("step_4", "step 4")
    wait(pusher)
    assert {path: text for path, text in head_files(hub_server).items() if path.startswith(LAST_CHECKPOINT)} == {
        f"{LAST_CHECKPOINT}/model.safetensors": "weights 2"
    }
    # A save without a checkpoint (a new best model) leaves last-checkpoint/ as it is.
    (run_folder.path / "model" / "notes.txt").unlink()
    save(run_folder, "model", {"config.json": "{}", "model.safetensors": "best weights"})
    pusher.push(None, "epoch 0")
    wait(pusher)
    assert head_files(hub_server)[f"{LAST_CHECKPOINT}/model.safetensors"] == "weights 2"
    assert titles(hub_server)[1:] == [f"Training in progress, {save}" for save in ("step 2", "step 4", "epoch 0")]
    assert not list(run_folder.path.glob(".hub-push*")), "a staging folder was left behind"


def test_a_push_uploads_the_files_of_its_save_even_when_the_next_save_replaced_them(hub_server, run_folder, held):
    pusher = HubPusher(run_folder, REPO_ID, "every_save")
    release = held(pusher)
    pusher.push(None, "epoch 0")  # queued behind the held thread: it runs after the model is replaced
    save(run_folder, "model", {"config.json": "{}", "model.safetensors": "weights 2"})
    release.set()
    wait(pusher)
    assert head_files(hub_server)["model.safetensors"] == "weights 1"


def test_a_save_replaces_a_queued_push_and_carries_its_checkpoints(hub_server, run_folder, held):
    pusher = HubPusher(run_folder, REPO_ID, "all_checkpoints")
    release = held(pusher)
    pusher.push("step_2", "step 2")
    save(run_folder, "step_4", {"model.safetensors": "weights 2"})
    pusher.push("step_4", "step 4")
    release.set()
    wait(pusher)
    assert titles(hub_server)[1:] == ["Training in progress, step 4"]
    assert {"step_2/model.safetensors", "step_4/model.safetensors"} <= set(head_files(hub_server))
    assert not list(run_folder.path.glob(".hub-push*")), "a cancelled push left its staging folder"


def test_a_failed_push_is_one_log_line_and_the_next_save_pushes_what_it_missed(hub_server, run_folder, caplog):
    hub_server.fail("/commit/", status=500, times=1)
    pusher = HubPusher(run_folder, REPO_ID, "all_checkpoints")
    with caplog.at_level(logging.INFO, logger="fiberbench"):
        pusher.push("step_2", "step 2")
        wait(pusher)
        save(run_folder, "step_4", {"model.safetensors": "weights 2"})
        pusher.push("step_4", "step 4")
        wait(pusher)
    failures = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert len(failures) == 1 and failures[0].startswith("The push of step 2 failed; training goes on"), failures
    assert "\n" not in failures[0]
    assert {"step_2/model.safetensors", "step_4/model.safetensors"} <= set(head_files(hub_server))


def test_the_final_push_waits_for_the_others_and_raises_when_it_fails(hub_server, run_folder, held):
    pusher = HubPusher(run_folder, REPO_ID, "checkpoint")
    release = held(pusher)
    pusher.push("step_2", "step 2")
    save(run_folder, "model", {"config.json": "{}", "model.safetensors": "final weights"})
    threading.Timer(0.5, release.set).start()
    pusher.push_final()
    assert titles(hub_server)[1:] == ["Training in progress, step 2", "FIBER model trained with fiberbench"]
    assert head_files(hub_server)["model.safetensors"] == "final weights"

    hub_server.fail("/commit/", status=500)
    save(run_folder, "model", {"config.json": "{}", "model.safetensors": "other weights"})
    with pytest.raises(HubPushError, match=r"(?s)the push did not complete.*\(the run's outputs in .* are complete\)"):
        pusher.push_final()


def test_only_what_the_run_listed_is_pushed(hub_server, run_folder):
    # A file dropped into the run's model folder by someone else is never uploaded.
    (run_folder.path / "model" / "credentials.txt").write_text("secret", encoding="utf-8")
    HubPusher(run_folder, REPO_ID, "end").push_final()
    assert "credentials.txt" not in HfApi().list_repo_files(REPO_ID)


def push_checkpoint(folder, files: dict[str, bytes], commit_message: str = "Add a checkpoint") -> str:
    """Push `files` (path in the repo -> bytes) to REPO_ID through a local folder; returns the new head commit."""
    for name, content in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content)
    push_files({name: folder / name for name in files}, REPO_ID, commit_message=commit_message, source="test")
    return HfApi().repo_info(REPO_ID).sha


CHECKPOINT = {
    "training_progress.json": b'{"completed_steps": 2}',
    "model.safetensors": b"weights",
    "random_states_0.pkl": b"rng",
    "best_model/config.json": b"{}",
    "best_model/modeling_fiber_t5.py": b"code a resume never loads",
    "README.md": b"# notes",
}


@pytest.mark.parametrize("name, folder", [("fiber-org/run", LAST_CHECKPOINT), ("fiber-org/run:step_2/", "step_2")])
def test_a_hub_checkpoint_is_repo_id_and_folder(name, folder):
    assert HubCheckpoint.parse(name, revision="v1") == HubCheckpoint("fiber-org/run", folder, "v1")


@pytest.mark.parametrize("name", ["not a repo", "a/b/c", "fiber-org/run:../x", "fiber-org/run:a//b"])
def test_what_is_no_hub_checkpoint_reads_as_none(name):
    assert HubCheckpoint.parse(name) is None


def test_a_download_takes_the_trusted_files_of_one_commit_into_the_cache(hub_server, tmp_path):
    first = push_checkpoint(tmp_path / "v1", {f"step_2/{name}": content for name, content in CHECKPOINT.items()})
    push_checkpoint(tmp_path / "v2", {"step_2/model.safetensors": b"newer weights"}, "A later push")
    downloaded = download_checkpoint(HubCheckpoint(REPO_ID, "step_2", revision=first))
    assert downloaded.commit == first and downloaded.path.name == "step_2"
    local = {path.relative_to(downloaded.path).as_posix() for path in downloaded.path.rglob("*") if path.is_file()}
    assert local == {"training_progress.json", "model.safetensors", "random_states_0.pkl", "best_model/config.json"}
    assert (downloaded.path / "model.safetensors").read_bytes() == b"weights"
    assert downloaded.skipped == ["README.md", "best_model/modeling_fiber_t5.py"]
    assert str(downloaded.path).startswith(str(tmp_path / "hf_home"))  # the test's HF cache, not the run folder


class Payload:
    def __reduce__(self):
        return print, ("a pickle ran",)


def test_a_pickle_train_py_never_writes_refuses_the_checkpoint_before_any_download(hub_server, tmp_path):
    files = {f"{LAST_CHECKPOINT}/{name}": content for name, content in CHECKPOINT.items()}
    push_checkpoint(tmp_path / "repo", files | {f"{LAST_CHECKPOINT}/custom_checkpoint_0.pkl": pickle.dumps(Payload())})
    hub_server.requests.clear()
    with pytest.raises(CheckpointError, match="fiber-org/run:last-checkpoint/custom_checkpoint_0.pkl: a pickle that"):
        download_checkpoint(HubCheckpoint(REPO_ID))
    assert not [path for method, path, _ in hub_server.requests if "/resolve/" in path], "something was downloaded"


@pytest.mark.parametrize(
    "name, revision, message",
    [
        ("fiber-org/no-such-run", None, "no such checkpoint folder, and the Hub at .* has no model 'fiber-org/no-such"),
        (REPO_ID, "no-such-branch", "has no revision 'no-such-branch'"),
        (f"{REPO_ID}:step_99", None, "the repo has no folder 'step_99'"),
    ],
)
def test_a_hub_checkpoint_that_is_not_there_is_one_data_error(hub_server, tmp_path, name, revision, message):
    push_checkpoint(tmp_path / "repo", {f"{LAST_CHECKPOINT}/{file}": content for file, content in CHECKPOINT.items()})
    with pytest.raises(DataError, match=message):
        download_checkpoint(HubCheckpoint.parse(name, revision=revision))


def test_the_staging_folder_a_killed_push_left_is_removed_by_the_next_run(run_folder):
    # What a run killed while pushing leaves: its hard links hold on to the files of an old save.
    left = run_folder.path / f".hub-push.incomplete-{socket.gethostname()}-{2**22 + 1}-x1"
    left.mkdir()
    os.link(run_folder.path / "model" / "model.safetensors", left / "model.safetensors")
    remove_stale_pushes(run_folder)
    assert not left.exists() and (run_folder.path / "model" / "model.safetensors").exists()
