"""FIBER, the video fill-in-the-blanks benchmark, as one import namespace over its Hub artifacts.

The subpackages map onto the repository's top-level folders, each one a Hub artifact:
``fiberbench.data`` is ``dataset_script/``, ``fiberbench.metric`` is ``metric/``,
``fiberbench.modeling`` is ``modeling/`` and ``fiberbench.training`` is ``training/``.
"""

__version__ = "0.1.0"
