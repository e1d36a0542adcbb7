"""Measure the figures the README and the documentation quote, as a user sees them, and write them where they are read.

    python docs/measure.py --only main_job,picture        # the main job's time, and docs/by_category.png
    python docs/measure.py --only suite,fast_tests        # `pytest -n 2`, `pytest -n 2 -m "not slow"`
    python docs/measure.py --only video_tests --video_python .venv-video/bin/python   # `pytest -n 2 -m video`

Each figure sits in the Markdown between `<!-- measured: NAME -->` and `<!-- /measured -->`: a part replaces it with
the new figure and the conditions it was measured in (CPU cores, load average at the start and the end, the date); a
part whose command fails writes nothing. docs/benchmarks.md says how each part runs.
"""

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from fiberbench.outputs import atomic_path, write_text

REPOSITORY = Path(__file__).resolve().parents[1]
DOCS = REPOSITORY / "docs"
PICTURE = DOCS / "by_category.png"
MAIN_JOB = ["accelerate", "launch", "--config_file", "training/accelerate.yaml", "training/train.py"]
# The block of this page that draws the picture is the one writing into this folder.
PICTURE_PAGE = DOCS / "score-your-own-system.md"
PICTURE_OUTPUT = "outputs/evaluation_with_text_only"
PARTS = ("main_job", "picture", "suite", "fast_tests", "video_tests")
MARKED = re.compile(r"(<!-- measured: (?P<name>[a-z_]+) -->)(?P<figure>.*?)(<!-- /measured -->)", re.DOTALL)


class MeasureError(Exception):
    """What stops a part, said in one line."""


@dataclass
class Timing:
    """One command's wall and CPU time (its processes and theirs, user + system), and the load around it."""

    wall_seconds: float
    cpu_seconds: float
    load_before: float
    load_after: float

    @property
    def conditions(self) -> str:
        return (
            f"{os.cpu_count()} CPU cores, load average {self.load_before:.1f} when it started and "
            f"{self.load_after:.1f} when it ended, {datetime.now(timezone.utc):%Y-%m-%d}"
        )


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> Timing:
    """Run `command` to its end, timed; its output goes to ours, and a failure is a MeasureError."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_before, started = os.getloadavg()[0], time.monotonic()
    status = subprocess.run(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL).returncode
    wall, load_after = time.monotonic() - started, os.getloadavg()[0]
    if status != 0:
        raise MeasureError(f"`{' '.join(command)}` (in {cwd}) exited with status {status}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)
    return Timing(wall, cpu, load_before, load_after)


def replace_figures(text: str, figures: dict[str, str]) -> tuple[str, set[str]]:
    """`text` with the figure between each marker named in `figures` replaced, and the names it holds."""
    found = set()

    def figure(match: re.Match) -> str:
        name = match["name"]
        if name not in figures:
            return match[0]
        found.add(name)
        return f"{match[1]}{figures[name]}{match[4]}"

    return MARKED.sub(figure, text), found


def documents() -> list[Path]:
    """Where figures are quoted: the README and every page of the documentation."""
    return [REPOSITORY / "README.md", *sorted(DOCS.glob("*.md"))]


def write_figures(figures: dict[str, str]) -> None:
    """Put each figure between its markers in every document that quotes it; a figure quoted nowhere is an error."""
    updated, found = {}, set()
    for path in documents():
        text = path.read_text(encoding="utf-8")
        new_text, names = replace_figures(text, figures)
        found |= names
        if new_text != text:
            updated[path] = new_text
    if missing := sorted(set(figures) - found):
        raise MeasureError(f"no document has the marker <!-- measured: {missing[0]} --> for its figure")
    for path, text in updated.items():
        write_text(path, text)
        print(f"measure.py: wrote the figures into {path.relative_to(REPOSITORY)}")


def fresh_copy(destination: Path) -> Path:
    """The committed tree, as a fresh clone has it (no outputs, no caches), unpacked into `destination`."""
    archive = destination / "HEAD.tar"
    root = destination / "fiber"
    root.mkdir()
    status = subprocess.run(["git", "archive", "--output", str(archive), "HEAD"], cwd=REPOSITORY).returncode
    if status != 0:
        raise MeasureError(f"`git archive HEAD` failed in {REPOSITORY}: the copy is made from a git checkout")
    subprocess.run(["tar", "-x", "-f", str(archive), "-C", str(root)], check=True)
    archive.unlink()
    return root


def offline_environment(hf_home: Path) -> dict[str, str]:
    """Ours, with a Hugging Face home of its own (nothing cached, no token) and the Hub switched off."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=str(hf_home))
    return env


def picture_block() -> str:
    """The bash block of PICTURE_PAGE that writes PICTURE_OUTPUT: what the page shows is what it runs."""
    blocks = re.findall(r"^```bash\n(.*?)^```", PICTURE_PAGE.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
    drawing = [block for block in blocks if PICTURE_OUTPUT in block]
    if len(drawing) != 1:
        raise MeasureError(f"{PICTURE_PAGE.relative_to(REPOSITORY)}: expected one bash block writing {PICTURE_OUTPUT}")
    return drawing[0]


def measure_main_job_and_picture(parts: set[str]) -> dict[str, str]:
    """The main job in a fresh copy, timed; then, if asked, the picture's block after it in the same copy."""
    figures = {}
    with tempfile.TemporaryDirectory(prefix="fiber-measure-") as scratch:
        root = fresh_copy(Path(scratch))
        env = offline_environment(Path(scratch) / "hf_home")
        timing = timed(MAIN_JOB, root, env)
        if "main_job" in parts:
            figures["main_job"] = (
                f"In a fresh clone with nothing cached, offline, `{' '.join(MAIN_JOB)}` took "
                f"{timing.wall_seconds:.0f} s of wall time and {timing.cpu_seconds:.0f} s of CPU (user + system) "
                f"on a machine of {timing.conditions} (`python docs/measure.py --only main_job`)."
            )
        if "picture" in parts:
            drawing = timed(["bash", "-euo", "pipefail", "-c", picture_block()], root, env)
            drawn = root / PICTURE_OUTPUT / "by_category.png"
            with atomic_path(PICTURE) as temporary:
                temporary.write_bytes(drawn.read_bytes())
            print(f"measure.py: wrote {PICTURE.relative_to(REPOSITORY)}")
            figures["picture"] = (
                "what the main job and the block above draw in a fresh clone, offline "
                f"(`python docs/measure.py --only picture`, on a machine of {drawing.conditions}); the bars may "
                "differ a little on a machine with another number of cores."
            )
    return figures


def minutes(timing: Timing) -> str:
    """Wall and CPU time in minutes: the CPU time (the tests' processes and theirs) holds on a busy machine too."""
    return (
        f"{timing.wall_seconds / 60:.1f} minutes of wall time and {timing.cpu_seconds / 60:.1f} CPU-minutes "
        "(user + system)"
    )


def measure_tests(parts: set[str], video_python: Path | None) -> dict[str, str]:
    """The README's test commands from the repository root, each timed."""
    figures = {}
    commands = {
        "suite": ([sys.executable, "-m", "pytest", "-n", "2"], "`pytest -n 2`"),
        "fast_tests": ([sys.executable, "-m", "pytest", "-n", "2", "-m", "not slow"], '`pytest -n 2 -m "not slow"`'),
    }
    if "video_tests" in parts:
        commands["video_tests"] = ([str(video_python), "-m", "pytest", "-n", "2", "-m", "video"], "`pytest -n 2 -m video`")
    for name, (command, spelled) in commands.items():
        if name in parts:
            timing = timed(command, REPOSITORY, dict(os.environ))
            figures[name] = (
                f"{spelled} took {minutes(timing)} on a machine of {timing.conditions} "
                f"(`python docs/measure.py --only {name}`)"
            )
    return figures


def parse_parts(value: str) -> set[str]:
    parts = {part.strip() for part in value.split(",") if part.strip()}
    if unknown := sorted(parts - set(PARTS)):
        raise argparse.ArgumentTypeError(f"unknown part {unknown[0]!r}: choose from {', '.join(PARTS)}")
    return parts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="measure.py", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", type=parse_parts, default=set(PARTS), metavar="PART[,PART...]",
        help=f"the parts to measure, comma-separated (default: all): {', '.join(PARTS)}",
    )
    parser.add_argument("--video_python", type=Path, help="the video environment's Python, for video_tests")
    args = parser.parse_args(argv)
    if "video_tests" in args.only and args.video_python is None:
        parser.error("the video_tests part needs --video_python, the Python of the video environment")
    try:
        figures = {}
        if args.only & {"main_job", "picture"}:
            figures |= measure_main_job_and_picture(args.only)
        figures |= measure_tests(args.only, args.video_python)
        write_figures(figures)
    except MeasureError as error:
        print(f"measure.py: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
