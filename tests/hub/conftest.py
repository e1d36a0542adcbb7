"""Fixtures of the Hub tests: a local Hub server and the client settings that point at it."""

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
