"""train.py --push_to_hub --hub_strategy against the local Hub: the Trainer's pushes at each save, each a loadable
FIBER model with its card, and the final model."""

import json

import pytest

from fiberbench.outputs import FOLDER_RECORD

from ..training.conftest import error_line, run_train

pytestmark = pytest.mark.slow

REPO_ID = "fiber-org/fiber-t5-strategy"
PUSH = ["--push_to_hub", "--hub_model_id", REPO_ID]
# 12 steps saved every 4 and kept, nothing evaluated (no spaCy).
SAVED = ["--max_steps", 12, "--save_strategy", "steps", "--save_steps", 4, "--save_total_limit", 3, "--do_eval",
         "false", "--do_predict", "false", "--only_noun_phrases", "false"]
# A loadable FIBER model: weights, config, the remote code, the processor and a card.
MODEL_FILES = {"config.json", "model.safetensors", "configuration_fiber_t5.py", "modeling_fiber_t5.py",
               "processing_fiber.py", "processor_config.json", "tokenizer.json", "README.md"}


def text(hub, commit, path: str) -> str:
    return hub.store.read_blob(commit.files[path].sha256).decode()


def test_checkpoint_strategy_pushes_the_model_its_card_and_the_last_checkpoint_at_each_save(hub_server, tmp_path):
    output_dir = tmp_path / "run"
    run_train([*SAVED, *PUSH, "--hub_strategy", "checkpoint", "--output_dir", output_dir], offline=False)
    pushed = {commit.title: commit for commit in hub_server.history(REPO_ID)[1:]}
    # The Trainer skips the push of a save made while the one before is still going (under load, even part of the
    # first save's): the final model's is always there, and a checkpoint of some save.
    saves = {f"Training in progress, step {step}{kind}": step for step in (4, 8, 12) for kind in ("", ", checkpoint")}
    assert list(pushed)[-1] == "End of training" and set(pushed) - {"End of training"} <= set(saves)
    assert any(title.endswith(", checkpoint") for title in pushed), list(pushed)
    for title, commit in pushed.items():
        if title.endswith("checkpoint"):  # its own commit, which may land before its save's model (or without it)
            state = json.loads(text(hub_server, commit, "last-checkpoint/trainer_state.json"))
            assert state["global_step"] == saves[title] and "settings" in state["stateful_callbacks"]["RunRecord"]["args"]
            continue
        assert MODEL_FILES <= set(commit.files), title
        card = text(hub_server, commit, "README.md")
        assert "synthetic-data" in card and ("final model" in card) == (title == "End of training")
        if title in saves:  # written as its push began; a later save leaves it alone while the upload runs
            assert f"after **{saves[title]} optimizer steps" in card, title
    final = pushed["End of training"]
    for path in (output_dir / "model").iterdir():
        assert hub_server.store.read_blob(final.files[path.name].sha256) == path.read_bytes(), path.name


def test_a_final_push_that_fails_fails_the_run_in_one_line_after_its_outputs(hub_server, tmp_path):
    output_dir = tmp_path / "run"
    hub_server.fail("/commit/", status=500)
    result = run_train(["--max_steps", 2, "--do_eval", "false", "--do_predict", "false", "--only_noun_phrases",
                        "false", *PUSH, "--output_dir", output_dir], check=False, offline=False)
    assert result.returncode == 1 and REPO_ID in error_line(result)
    assert json.loads((output_dir / FOLDER_RECORD).read_text(encoding="utf-8"))["state"] == "complete"
    assert (output_dir / "model" / "README.md").is_file() and (output_dir / "results.json").is_file()
