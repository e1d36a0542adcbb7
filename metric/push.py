"""`fiberbench push-metric`: publish the fiber_metric folder as a Hub Space that `evaluate.load` reads."""

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("repo_id", help='The Space to create or update, e.g. "ORG/fiber_metric".')
    parser.add_argument("--private", action="store_true", help="Create the Space as private.")
    parser.add_argument("--hub_token", default=None, help="Hub token; default: HF_TOKEN or the saved login.")


def run(args: argparse.Namespace) -> int:
    from fiberbench.hub import push_folder

    from . import METRIC_PATH

    url = push_folder(
        METRIC_PATH,
        args.repo_id,
        repo_type="space",
        token=args.hub_token,
        private=args.private,
        commit_message="Upload fiber_metric with `fiberbench push-metric`",
    )
    print(f"Pushed the FIBER metric to {url}; load it with evaluate.load({args.repo_id!r})")
    return 0
