"""train.py --push_to_hub --hub_strategy against the local Hub: the Trainer's pushes at each save, each a loadable
FIBER model with its card, and the final model."""

import json

import pytest

from fiberbench.outputs import FOLDER_RECORD

from ..training.conftest import error_line, run_train

pytestmark = pytest.mark.slow

REPO_ID = "fiber-org/fiber-t5-strategy"
PUSH = ["--push_to_hub", "--hub_model_id", REPO_ID]
# 12 steps saved every 4, nothing evaluated; every save pushed even while the one before is going (the Trainer would
# skip it): the test counts them.
SAVED = ["--max_steps", 12, "--save_strategy", "steps", "--save_steps", 4, "--do_eval", "false", "--do_predict",
         "false", "--hub_always_push", "true"]
# A loadable FIBER model: weights, config, the remote code, the processor and a card.
MODEL_FILES = {"config.json", "model.safetensors", "configuration_fiber_t5.py", "modeling_fiber_t5.py",
               "processing_fiber.py", "processor_config.json", "tokenizer.json", "README.md"}


def text(hub, commit, path: str) -> str:
    return hub.store.read_blob(commit.files[path].sha256).decode()


def test_checkpoint_strategy_pushes_the_model_its_card_and_the_last_checkpoint_at_each_save(hub_server, tmp_path):
    output_dir = tmp_path / "run"
    run_train([*SAVED, *PUSH, "--hub_strategy", "checkpoint", "--output_dir", output_dir], offline=False)
    pushed = hub_server.history(REPO_ID)[1:]
    assert [commit.title for commit in pushed] == [
        title for step in (4, 8, 12) for title in (f"Training in progress, step {step}",
                                                   f"Training in progress, step {step}, checkpoint")
    ] + ["End of training"]
    for commit in pushed:
        assert MODEL_FILES <= set(commit.files), commit.title
        card = text(hub_server, commit, "README.md")
        assert "synthetic-data" in card and ("final model" in card) == (commit.title == "End of training")
    for step, commit in zip((4, 8, 12), pushed[1:-1:2]):
        assert f"after **{step} optimizer steps" in text(hub_server, commit, "README.md")
        state = json.loads(text(hub_server, commit, "last-checkpoint/trainer_state.json"))
        assert state["global_step"] == step and "settings" in state["stateful_callbacks"]["RunRecord"]["args"]
    final = pushed[-1]
    for path in (output_dir / "model").iterdir():
        assert hub_server.store.read_blob(final.files[path.name].sha256) == path.read_bytes(), path.name


def test_a_final_push_that_fails_fails_the_run_in_one_line_after_its_outputs(hub_server, tmp_path):
    output_dir = tmp_path / "run"
    hub_server.fail("/commit/", status=500)
    result = run_train(["--max_steps", 2, "--do_eval", "false", "--do_predict", "false", *PUSH, "--output_dir",
                        output_dir], check=False, offline=False)
    assert result.returncode == 1 and REPO_ID in error_line(result)
    assert json.loads((output_dir / FOLDER_RECORD).read_text(encoding="utf-8"))["state"] == "complete"
    assert (output_dir / "model" / "README.md").is_file() and (output_dir / "results.json").is_file()
