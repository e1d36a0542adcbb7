"""The Hub Space of the FIBER metric: evaluate's Gradio widget over fiber_metric.py beside this file."""

from pathlib import Path

import evaluate
from evaluate.utils import launch_gradio_widget

# A path to the module file, not to the folder: a Space is cloned under a name that is not fiber_metric.
module = evaluate.load(str(Path(__file__).resolve().parent / "fiber_metric.py"))
launch_gradio_widget(module)
