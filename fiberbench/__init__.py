"""FIBER, the video fill-in-the-blanks benchmark, as one import namespace over its Hub artifacts.

The subpackages map onto the repository's top-level folders, each one a Hub artifact:
``fiberbench.data`` is ``dataset_script/``, ``fiberbench.metric`` is ``metric/``,
``fiberbench.modeling`` is ``modeling/`` and ``fiberbench.training`` is ``training/``.
"""

from importlib.metadata import PackageNotFoundError, version

# The paper's BibTeX entry, cited by the dataset card, the model card and the metric: its one copy is in the
# metric's folder, which ships alone (a string: importing it imports neither numpy nor evaluate).
from .metric.fiber_metric.citation import CITATION

try:
    __version__ = version("fiber-benchmark")  # pyproject.toml is the one place the version is written
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
