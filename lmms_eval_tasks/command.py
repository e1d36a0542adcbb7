"""`fiberbench lmms-eval-task`: print the folder of FIBER's lmms-eval task, for `lmms-eval --include_path`."""

import argparse

from . import TASK_PATH


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "Use: FIBER_VIDEO_DIR=videos lmms-eval --include_path \"$(fiberbench lmms-eval-task)\" --tasks fiber_test "
        "--model ... --log_samples --output_path results; then fiberbench evaluate on the samples file. The task "
        "reads the dataset folder `fiber` of the current directory (_default_template_yaml says how to read another)."
    )


def run(args: argparse.Namespace) -> int:
    print(TASK_PATH)
    return 0
