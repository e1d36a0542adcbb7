"""The leaderboard's Space folder: app.py, its card (README.md), requirements.txt, leaderboard.json, and a results copy.

The Space installs the FIBER package (requirements.txt) rather than a copy of its scoring code:
the board must score with the very code of `fiberbench evaluate` (the join, the metric, the
bootstrap and the tests), and a vendored copy would be a second implementation to drift. The
requirement pins the version that built the folder (`--package_requirement` names another, e.g.
a git URL). A local results folder is copied into the Space (`results/`); on the Hub, what is
submitted to such a Space lasts until it restarts, so a shared board keeps its results in a Hub
dataset repo (`--results_repo`).
"""

import json
import shutil
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from fiberbench.errors import UsageError

from fiberbench.leaderboard.app import CONFIG_FILE
from fiberbench.leaderboard.store import SUBMISSIONS, submission_folders

APP_FILE, CARD_FILE, REQUIREMENTS_FILE, RESULTS_DIR = "app.py", "README.md", "requirements.txt", "results"
SPACE_FILES = (APP_FILE, CARD_FILE, REQUIREMENTS_FILE, CONFIG_FILE)


def gradio_version() -> str:
    """The installed Gradio's version, which the Space's card asks the Hub for (sdk_version)."""
    try:
        return version("gradio")
    except PackageNotFoundError:
        raise UsageError("the leaderboard is a Gradio page: install gradio (`pip install gradio`)") from None


def card(config: dict, sdk_version: str) -> str:
    """The Space's README.md: the Hub's Space configuration in YAML, and what the board is."""
    where = config["results_repo"] or "the results folder copied into this Space"
    return f"""---
title: {json.dumps(config["title"])}
emoji: 🎬
colorFrom: blue
colorTo: green
sdk: gradio
sdk_version: {sdk_version}
app_file: {APP_FILE}
pinned: false
tags:
- leaderboard
- fiber
---

# {config["title"]}

The FIBER video fill-in-the-blanks leaderboard: every system's EM and F1 on the {config["split"]} split with
their confidence intervals, rank intervals from paired bootstrap resamples of the blanks, and pairwise
comparisons with Holm-corrected p-values, all computed by `fiberbench evaluate`'s code from the
predictions stored in {where}. Submissions are scored the same way; the split's answers stay on the server.
Made with `fiberbench leaderboard`.
"""


def write_space(
    staging: Path, config: dict, requirement: str | None, results_dir: Path | None, split: str
) -> list[str]:
    """Write the Space folder into `staging`; the paths to push (every file of the Space)."""
    from fiberbench import __version__
    from fiberbench.files import write_json, write_text

    write_text(staging / APP_FILE, (Path(__file__).parent / "space_app.py").read_text(encoding="utf-8"))
    write_text(staging / CARD_FILE, card(config, gradio_version()))
    write_text(staging / REQUIREMENTS_FILE, f"{requirement or f'fiber-benchmark[plots]=={__version__}'}\n")
    write_json(staging / CONFIG_FILE, config)
    paths = list(SPACE_FILES)
    if results_dir is not None:
        destination = staging / RESULTS_DIR / SUBMISSIONS / split
        destination.mkdir(parents=True)
        for folder in submission_folders(results_dir, split):
            shutil.copytree(folder, destination / folder.name)
        paths += [path.relative_to(staging).as_posix() for path in sorted(destination.rglob("*")) if path.is_file()]
    return paths
