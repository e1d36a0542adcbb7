"""`fiberbench push-metric`: publish the fiber_metric folder as a Hub Space that `evaluate.load` reads."""

import argparse
from pathlib import Path

from fiberbench.hub import push_folder

from . import METRIC_PATH

# All that is uploaded: a token in a `.env`, a scratch file or a cache beside them never leaves the machine.
SPACE_FILES = ("fiber_metric.py", "scores.py", "statistics.py", "agreement.py", "inputs.py", "citation.py", "README.md",
               "app.py", "requirements.txt")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("repo_id", help='The Space to create or update, e.g. "ORG/fiber_metric".')
    parser.add_argument("--private", action="store_true", help="Create the Space as private.")
    parser.add_argument("--hub_token", default=None, help="Hub token; default: HF_TOKEN or the saved login.")


def push_metric(repo_id: str, *, folder: Path = METRIC_PATH, token: str | None = None, private: bool = False) -> str:
    """Push the metric's `SPACE_FILES` from `folder` to the Space `repo_id`; its URL."""
    return push_folder(folder, repo_id, repo_type="space", token=token, private=private, paths=SPACE_FILES,
                       commit_message="Upload fiber_metric with `fiberbench push-metric`")


def run(args: argparse.Namespace) -> int:
    url = push_metric(args.repo_id, token=args.hub_token, private=args.private)
    print(f"Pushed the FIBER metric to {url}; load it with evaluate.load({args.repo_id!r})")
    return 0
