"""MkDocs hook: the public names' docstrings for the API page, read as installed, their doctests shown as code.

setuptools maps `fiberbench.data` onto `dataset_script/`, `fiberbench.modeling` onto `modeling/` and so on
(`[tool.setuptools.package-dir]` in pyproject.toml). mkdocstrings reads source files without importing them
(griffe's static analysis: fast, and nothing runs), and it looks for `fiberbench/modeling/` on disk, which
does not exist: this hook builds that tree in a temporary folder, of symbolic links into the repository
following pyproject.toml's mapping, and gives it to mkdocstrings' Python handler as its search path.

The docstrings hold doctests (`>>> ...` and the expected output) in their prose, as the tests run them;
Markdown would run them together into a paragraph (and read `[50.0, 0.0]` as a link), so each is fenced
as a `pycon` block first.
"""

import atexit
import shutil
import tempfile
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, as the `docs` extra installs it there
    import tomli as tomllib

from markdown import Extension
from markdown.preprocessors import Preprocessor
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority

REPOSITORY = Path(__file__).resolve().parents[1]


def namespace_tree(root: Path) -> Path:
    """Under `root`, `fiberbench/` as the installed package has it: each mapped folder linked in at its name."""
    pyproject = tomllib.loads((REPOSITORY / "pyproject.toml").read_text(encoding="utf-8"))
    package_dirs = pyproject["tool"]["setuptools"]["package-dir"]
    top = root / "fiberbench"
    top.mkdir()
    for child in (REPOSITORY / package_dirs["fiberbench"]).iterdir():
        (top / child.name).symlink_to(child)
    for package, folder in package_dirs.items():
        if package != "fiberbench":
            root.joinpath(*package.split(".")).symlink_to(REPOSITORY / folder)
    return root


class FencedDoctests(Preprocessor):
    """Fence each doctest: from a line starting with `>>> ` outside a fenced block to the next blank line."""

    def run(self, lines: list[str]) -> list[str]:
        fenced, in_doctest, in_fence = [], False, False
        for line in lines:
            if not in_doctest and line.lstrip().startswith("```"):
                in_fence = not in_fence
            if not in_doctest and not in_fence and line.lstrip().startswith(">>> "):
                fenced.append(line[: len(line) - len(line.lstrip())] + "```pycon")
                in_doctest = True
            elif in_doctest and not line.strip():
                fenced.append(fenced[-1][: len(fenced[-1]) - len(fenced[-1].lstrip())] + "```")
                in_doctest = False
            fenced.append(line)
        return fenced + (["```"] if in_doctest else [])


class DoctestExtension(Extension):
    def extendMarkdown(self, md) -> None:
        # Before the fenced-code preprocessor (priority 25) reads the fences.
        md.preprocessors.register(FencedDoctests(md), "fenced_doctests", 30)


# Before mkdocstrings' own on_config (priority 0), which creates its handlers with the search paths.
@event_priority(100)
def on_config(config: MkDocsConfig) -> MkDocsConfig:
    root = Path(tempfile.mkdtemp(prefix="fiberbench-api-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    config.plugins["mkdocstrings"].config["handlers"]["python"]["paths"] = [str(namespace_tree(root))]
    config.markdown_extensions.append(DoctestExtension())
    return config
