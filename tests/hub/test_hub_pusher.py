"""HubPusher against the local Hub: background pushes of a run folder's own files, as --hub_strategy says."""

import logging
import threading

import pytest
from huggingface_hub import HfApi

from fiberbench.hub import HubPushError
from fiberbench.training.hub_checkpoints import LAST_CHECKPOINT, HubPusher
from fiberbench.training.outputs import RunFolder

REPO_ID = "fiber-org/run"


@pytest.fixture
def run_folder(tmp_path):
    """A run folder as train.py writes it: a model and one checkpoint, listed in its record."""
    run = RunFolder.check(str(tmp_path / "run"), overwrite=False, resume_from_checkpoint=None, inputs=[])
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
    repo = hub.store.repos[("model", repo_id)]
    oid, found = repo.branches["main"], []
    while oid is not None:
        found.append(repo.commits[oid].title)
        oid = repo.commits[oid].parent
    return found[::-1]


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
    assert titles(hub_server)[1:] == ["Training in progress, step 2", "Training in progress, step 4"]
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
