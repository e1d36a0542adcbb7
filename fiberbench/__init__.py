"""FIBER, the video fill-in-the-blanks benchmark, as one import namespace over its Hub artifacts.

The subpackages map onto the repository's top-level folders, each one a Hub artifact:
``fiberbench.data`` is ``dataset_script/``, ``fiberbench.metric`` is ``metric/``,
``fiberbench.modeling`` is ``modeling/`` and ``fiberbench.training`` is ``training/``.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("fiber-benchmark")  # pyproject.toml is the one place the version is written
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

# The paper, cited by the dataset card, the model card and the metric (whose self-contained folder
# keeps a copy that tests/test_citation.py holds equal to this one).
CITATION = """\
@inproceedings{castro-etal-2022-fiber,
    title = "{FIB}er: Fill-in-the-Blanks as a Challenging Video Understanding Evaluation Framework",
    author = "Castro, Santiago and Wang, Ruoyao and Huang, Pingxuan and Stewart, Ian and Ignat, Oana and
      Liu, Nan and Stroud, Jonathan C. and Mihalcea, Rada",
    booktitle = "Proceedings of the 60th Annual Meeting of the Association for Computational Linguistics
      (Volume 1: Long Papers)",
    year = "2022",
    publisher = "Association for Computational Linguistics",
}
"""
