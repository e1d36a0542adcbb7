"""The documentation site (mkdocs.yml, docs/): it builds in strict mode, and strict mode fails on what it must; the
figures its pages quote are the measuring script's, between markers that script knows."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPOSITORY = Path(__file__).parents[1]
DOCS = REPOSITORY / "docs"

spec = importlib.util.spec_from_file_location("measure", DOCS / "measure.py")
measure = importlib.util.module_from_spec(spec)
spec.loader.exec_module(measure)


def build(config: Path, site_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(site_dir)],
        cwd=REPOSITORY, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # no banner about Material's end of life on every build
    )


@pytest.mark.slow
def test_the_site_builds_strictly_with_the_api_page(tmp_path):
    result = build(REPOSITORY / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stderr[-4000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    # Docstrings of the public names, read through pyproject.toml's mapping of `fiberbench` onto the folders.
    for name in ("fiberbench.modeling.FiberT5ForConditionalGeneration", "fiberbench.data.load_fiber",
                 "fiberbench.metric.fiber_metric.statistics.compare_systems", "fiberbench.hub.push_folder"):
        assert f'id="{name}"' in api, name
    assert 'class="language-pycon' in api or '<span class="gp">&gt;&gt;&gt; </span>' in api  # doctests as code


def site_without_api(tmp_path: Path, page: str, listed: bool = True) -> Path:
    """mkdocs.yml over a copy of the pages plus `page` as added.md (in the menu if `listed`), the API page without its
    docstrings (they take most of a build's time and are not what is tested here)."""
    config = yaml.safe_load((REPOSITORY / "mkdocs.yml").read_text(encoding="utf-8"))
    docs = tmp_path / "docs"
    docs.mkdir()
    for path in DOCS.glob("*"):
        if path.suffix in (".md", ".png"):
            (docs / path.name).write_bytes(path.read_bytes())
    (docs / "api.md").write_text("# API reference\n", encoding="utf-8")
    (docs / "added.md").write_text(page, encoding="utf-8")
    if listed:
        config["nav"].append({"Added": "added.md"})
    config["docs_dir"] = str(docs)
    config["hooks"] = [str(REPOSITORY / hook) for hook in config["hooks"]]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return tmp_path / "mkdocs.yml"


@pytest.mark.slow
@pytest.mark.parametrize(
    "page, listed, said",
    [
        ("# Added\n\n[a page](no-such-page.md)\n", True, "no-such-page.md"),
        ("# Added\n\n[an anchor](dataset.md#no-such-section)\n", True, "no-such-section"),
        ("# Added\n\nA page left out of the menu.\n", False, "added.md"),
    ],
    ids=["missing page", "missing anchor", "page not in the menu"],
)
def test_strict_mode_fails_on_a_broken_link_or_a_page_left_out(tmp_path, page, listed, said):
    result = build(site_without_api(tmp_path, page, listed), tmp_path / "site")
    assert result.returncode == 1 and said in result.stderr, result.stderr[-4000:]


def test_the_copy_of_the_pages_builds(tmp_path):
    """The control of the test above: the same copy with a good page builds (so the failures are the links')."""
    result = build(site_without_api(tmp_path, "# Added\n\n[The dataset](dataset.md#the-dataset-dataset_script)\n"),
                   tmp_path / "site")
    assert result.returncode == 0, result.stderr[-4000:]


def marked_documents() -> dict[Path, str]:
    return {path: path.read_text(encoding="utf-8") for path in measure.documents()}


def test_every_figure_has_its_part_and_every_part_its_figure():
    names = {match["name"] for text in marked_documents().values() for match in measure.MARKED.finditer(text)}
    assert names == set(measure.PARTS)


def test_no_figure_starts_a_line():
    """A line that starts with `<!--` starts a raw HTML block in Markdown (GitHub's and MkDocs'): the figure after
    the marker would be shown raw, its `code` unformatted. A marker goes after some words of its sentence."""
    for path, text in marked_documents().items():
        for number, line in enumerate(text.splitlines(), start=1):
            assert not re.match(r"\s*(?:[-*] )?<!-- measured", line), f"{path.name} line {number}"


def test_figures_are_replaced_between_their_markers_only():
    text = (
        "Took <!-- measured: main_job -->49 s<!-- /measured -->; the suite "
        "<!-- measured: suite -->11\nminutes<!-- /measured -->."
    )
    replaced, found = measure.replace_figures(text, {"suite": "12.5 minutes (2 CPU cores)"})
    assert replaced == (
        "Took <!-- measured: main_job -->49 s<!-- /measured -->; the suite "
        "<!-- measured: suite -->12.5 minutes (2 CPU cores)<!-- /measured -->."
    )
    assert found == {"suite"}


def test_a_figure_quoted_nowhere_is_an_error(monkeypatch, tmp_path):
    page = tmp_path / "page.md"
    page.write_text("No markers here.\n", encoding="utf-8")
    monkeypatch.setattr(measure, "documents", lambda: [page])
    with pytest.raises(measure.MeasureError, match="no document has the marker <!-- measured: main_job -->"):
        measure.write_figures({"main_job": "1 s"})
    assert page.read_text(encoding="utf-8") == "No markers here.\n"


@pytest.mark.parametrize(
    "arguments, said",
    [
        (["--only", "main_job,pictures"], "measure.py: error: argument --only: unknown part 'pictures': choose from"),
        (["--only", "video_tests"], "measure.py: error: the video_tests part needs --video_python"),
    ],
)
def test_a_bad_selection_is_one_line_before_anything_runs(arguments, said):
    result = subprocess.run(
        [sys.executable, str(DOCS / "measure.py"), *arguments], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and result.stderr.splitlines()[-1].startswith(said), result.stderr
    assert "Traceback" not in result.stderr
