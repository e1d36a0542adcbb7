"""FIBER as tasks of lmms-eval (EvolvingLMMs-Lab/lmms-eval): `fiber/` holds their YAML and `utils.py`, as lmms-eval's
own task folders do; `fiberbench lmms-eval-task` prints that folder for `lmms-eval --include_path`."""

from pathlib import Path

# The folder to pass to `lmms-eval --include_path`: fiber_test.yaml, fiber_val.yaml, their template and utils.py.
TASK_PATH = Path(__file__).resolve().parent / "fiber"
