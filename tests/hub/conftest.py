"""Fixtures of the Hub tests: a local Hub server and the client settings that point at it; a 2-process training run
that pushed every checkpoint to one, made once per test run."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from huggingface_hub import constants

# hub_server.py is a standalone module beside this file; pytest's importlib mode does not put
# test folders on sys.path.
sys.path.insert(0, str(Path(__file__).parent))
from hub_server import LocalHub  # noqa: E402

from ..built_once import built_once, load_process, save_process  # noqa: E402
from ..training.conftest import TRAIN_SCRIPT, train_command  # noqa: E402

# `--multi_gpu` on a machine without GPUs: train.py makes the processes one CPU group (gloo).
TWO_PROCESSES = ["--multi_gpu", "--num_processes", 2]
# 8 steps, a checkpoint every 4 (step_4 and step_8), nothing evaluated: what `two_processes_pushed_run` trains.
TWO_PROCESS_RUN = ["--max_train_steps", 8, "--checkpointing_steps", 4, "--no-do_eval", "--no-do_predict"]
TWO_PROCESS_REPO_ID = "fiber-org/fiber-t5-run"


@pytest.fixture
def hub_server(tmp_path, monkeypatch):
    """A LocalHub for one test, with this process and its child processes pointed at it.

    Child processes read the environment set here when they import huggingface_hub, datasets,
    transformers and evaluate. This process imported huggingface_hub before the test, and it
    reads HF_ENDPOINT (and the resolve URL template made from it), HF_HUB_DISABLE_XET, the cache
    folder and the token file path at import time, so the module constants it consults on each
    call are set as well. In this process, use `HfApi()` objects (they take `constants.ENDPOINT`
    when created), `hf_hub_download` and `snapshot_download`, not the module-level shortcuts
    such as `huggingface_hub.upload_folder` (bound to an `HfApi` made at import). datasets,
    transformers and evaluate keep their own import-time copies: run them in a child process
    (`run_client`).

    Teardown fails the test when a client asked for a route the server does not implement.
    """
    with LocalHub(storage=tmp_path / "hub_storage") as hub:
        env = hub.client_env(tmp_path / "hf_home")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("HF_OIDC_RESOURCE", raising=False)
        monkeypatch.setattr(constants, "ENDPOINT", hub.url)
        resolve_url = hub.url + "/{repo_id}/resolve/{revision}/{filename}"
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", resolve_url)
        monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
        monkeypatch.setattr(constants, "HF_HUB_CACHE", env["HF_HUB_CACHE"])
        # Never the developer's own saved login.
        monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "hf_home" / "token"))
        yield hub
    assert not hub.unhandled, f"Clients needed routes the local Hub does not serve: {hub.unhandled}"


@pytest.fixture
def run_client():
    """Run a command in a fresh process with this test's environment (so, with `hub_server`
    active, pointed at the local Hub); a failure shows the process's output.

    `run_client([sys.executable, "-c", code])` runs Python that has imported nothing of this test run.
    """

    def run(args: list, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [str(arg) for arg in args],
            cwd=cwd,
            env=dict(os.environ),
            stdin=subprocess.DEVNULL,  # a client that prompts (e.g. for trust_remote_code) fails, never waits
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if result.returncode != 0:
            pytest.fail(
                f"{' '.join(map(str, args))[:300]} exited with {result.returncode}\n"
                f"--- stdout ---\n{result.stdout[-5000:]}\n--- stderr ---\n{result.stderr[-10000:]}"
            )
        return result

    return run


@pytest.fixture(scope="session")
def two_processes_pushed_run(tmp_path_factory):
    """`TWO_PROCESS_RUN` in two processes, pushing every checkpoint (`--hub_strategy all_checkpoints`) to
    `TWO_PROCESS_REPO_ID` on a local Hub: run once per test run, for the Hub test that resumes it from the Hub and the
    training test that resumes it from its folder (pushing changes none of what it trains or saves there).

    Returns (its output folder, its finished process, the Hub it pushed to as `HubStore.save` wrote it: `load` it
    into a test's `hub_server`). All three are to read: a test that changes one copies it first.
    """

    def run(folder):
        with LocalHub() as hub:
            push = ["--push_to_hub", "--hub_model_id", TWO_PROCESS_REPO_ID, "--hub_strategy", "all_checkpoints"]
            args = [*TWO_PROCESS_RUN, *push, "--output_dir", folder / "run"]
            # As `hub_server` points a test's processes at its Hub (never the developer's own login).
            env = {name: value for name, value in os.environ.items() if name != "HF_OIDC_RESOURCE"}
            env |= {**hub.client_env(folder / "hf_home"), "TOKENIZERS_PARALLELISM": "false"}
            process = subprocess.run(
                train_command(args, TWO_PROCESSES),
                cwd=TRAIN_SCRIPT.parents[1],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            if process.returncode != 0:
                pytest.fail(f"the 2-process pushing run exited with {process.returncode}\n{process.stderr[-8000:]}")
            save_process(process, folder / "process.json")
            hub.store.save(folder / "hub")

    folder = built_once(tmp_path_factory, "two_processes_pushed_run", run)
    return folder / "run", load_process(folder / "process.json"), folder / "hub"
