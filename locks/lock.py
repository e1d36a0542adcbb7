"""The locked environments: write each lock from pyproject.toml, check an installed environment against its lock, refresh.

Every documented environment installs through a lock here, so that a fresh machine gets the versions CI tested
(docs/index.md): `main.txt` (the `test` extra beside the CPU torch), `lower.txt` (every dependency at its declared lower
bound, torch excepted) and `video.txt` (the `test`, `video` and `lmms-eval` extras beside the torch/torchvision pair
that loads here). uv resolves them for every supported Python and platform (`uv pip compile --universal`); pip
installs through them as constraints (`pip install -c locks/main.txt ...`), which add nothing that was not asked for.

    python locks/lock.py compile [ENV ...]   bring the locks in line with pyproject.toml (needs uv)
    python locks/lock.py verify ENV          exit 1, naming each package, if this environment differs from ENV's lock
    python locks/lock.py refresh [--write]   resolve every lock afresh and say what moved; --write replaces them

`refresh` is how the locks move: on purpose, never in CI, and then through CI (`.ci/run` installs from the new locks).
"""

import argparse
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCKS = ROOT / "locks"


# Environment -> (its extras, whether every dependency is held at its declared lower bound).
ENVIRONMENTS = {"main": (("test",), False), "lower": (("test",), True), "video": (("test", "video", "lmms-eval"), False)}
# The torch builds the environments are tested with (README): the CPU build here, and the pair whose torchvision
# loads beside it for the video processors.
TORCH = {"main": ("torch==2.13.0",), "lower": ("torch==2.13.0",), "video": ("torch==2.14.1", "torchvision==0.29.1")}
# In an environment but never in its lock: the installer, the locks' resolver, and the project itself (installed
# from the checkout).
NOT_LOCKED = {"pip", "uv", "fiber-benchmark"}

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)\s*(?:;\s*(.+))?$")


def lock_path(name: str, folder: Path = LOCKS) -> Path:
    return folder / f"{name}.txt"


def canonical(name: str) -> str:
    """A distribution name as PEP 503 compares them (`Huggingface_Hub` and `huggingface-hub` are one)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pyproject() -> dict:
    import tomllib  # Python 3.11: only writing the locks needs it, verifying runs on every Python the package supports

    with open(ROOT / "pyproject.toml", "rb") as file:
        return tomllib.load(file)


def lower_bounds() -> list[str]:
    """`name==lower` for every dependency of pyproject.toml with a lower bound, torch excepted (see the docstring)."""
    pins = []
    for dependency in pyproject()["project"]["dependencies"]:
        name, lower = re.match(r"([A-Za-z0-9_.-]+)\s*>=\s*([^,;\s]+)", dependency).groups()
        if name != "torch":
            pins.append(f"{name}=={lower}")
    return pins


def uv() -> list[str]:
    if shutil.which("uv"):
        return ["uv"]
    try:
        importlib.metadata.version("uv")
    except importlib.metadata.PackageNotFoundError:
        sys.exit("lock.py: the locks are resolved by uv, which is not installed here: pip install uv")
    return [sys.executable, "-m", "uv"]


def compile_lock(name: str, folder: Path) -> Path:
    """Resolve environment `name` from pyproject.toml into `folder/NAME.txt`.

    uv prefers the versions of an existing `folder/NAME.txt`: into the committed folder this moves only what
    pyproject.toml's changes require; into a fresh one it resolves with today's releases.
    """
    extras, at_lower_bounds = ENVIRONMENTS[name]
    python = re.match(r">=\s*([\d.]+)", pyproject()["project"]["requires-python"]).group(1)
    with tempfile.TemporaryDirectory() as scratch:
        pins = Path(scratch, "torch.in")
        pins.write_text("\n".join(TORCH[name]) + "\n")
        # No pre-release unless a pin asks for one: uv's default takes one where it is the newest release that fits
        # (sympy 1.14.0rc1 beside mpmath 1.4, which sympy 1.14.0 excludes).
        command = [*uv(), "pip", "compile", "pyproject.toml", str(pins), "--universal", "--python-version", python]
        command += ["--prerelease", "disallow"]
        command += [arg for extra in extras for arg in ("--extra", extra)]
        if at_lower_bounds:
            bounds = Path(scratch, "lower-bounds.txt")
            bounds.write_text("\n".join(lower_bounds()) + "\n")
            command += ["--constraint", str(bounds)]
        output = lock_path(name, folder)
        command += ["--quiet", "--output-file", str(output), "--custom-compile-command", f"python locks/lock.py compile {name}"]
        subprocess.run(command, cwd=ROOT, check=True)
    # uv writes the temporary input's path into the lock's "via" comments: name it as what it is.
    text = re.sub(r"-r \S*torch\.in", "the tested torch build (lock.py)", output.read_text())
    output.write_text(re.sub(r"-c \S*lower-bounds\.txt", "the lower bounds (lock.py)", text))
    return output


def read_lock(path: Path) -> dict[str, tuple[str, str | None]]:
    """{canonical name: (version, marker or None)} for each pin of a lock that applies to this interpreter."""
    from packaging.markers import Marker

    pins = {}
    for line in path.read_text().splitlines():
        match = _PIN.match(line.strip())
        if match:
            name, version, marker = match.groups()
            if marker is None or Marker(marker).evaluate():
                pins[canonical(name)] = (version, marker)
    return pins


def installed() -> dict[str, str]:
    """{canonical name: version} of every distribution in the running environment."""
    return {canonical(dist.metadata["Name"]): dist.version for dist in importlib.metadata.distributions()}


def differences(lock: dict[str, tuple[str, str | None]], present: dict[str, str]) -> list[str]:
    """How an environment differs from its lock: a version other than the lock's, or a package the lock lacks.

    A local label is not a difference (torch 2.13.0+cpu is the lock's 2.13.0, in its CPU build), and a pin that is
    not installed is none either: a lock constrains, it does not require.
    """
    from packaging.version import Version

    found = []
    for name, version in sorted(present.items()):
        if name in NOT_LOCKED:
            continue
        if name not in lock:
            found.append(f"{name} {version} is installed but not in the lock")
        elif Version(version).public != Version(lock[name][0]).public:
            found.append(f"{name} {version} is installed where the lock has {lock[name][0]}")
    return found


def verify(lock: Path) -> int:
    """Exit status 1, with a line for each difference, if the running environment is not what `lock` pins."""
    found = differences(read_lock(lock), installed())
    for line in found:
        print(f"lock.py verify: {line} ({lock.name})", file=sys.stderr)
    if not found:
        print(f"lock.py verify: this environment is what {lock.name} pins")
    return 1 if found else 0


def moved(old: Path, new: Path) -> list[str]:
    """The pins that changed between two versions of a lock, one line each (every marker fork compared)."""

    def pins(path: Path) -> dict[tuple[str, str | None], str]:
        entries = {}
        for line in path.read_text().splitlines() if path.exists() else []:
            match = _PIN.match(line.strip())
            if match:
                entries[(canonical(match.group(1)), match.group(3))] = match.group(2)
        return entries

    before, after = pins(old), pins(new)
    lines = []
    for key in sorted(before.keys() | after.keys(), key=lambda key: (key[0], key[1] or "")):
        name = key[0] + (f" ; {key[1]}" if key[1] else "")
        if key not in after:
            lines.append(f"{name}: {before[key]} -> (gone)")
        elif key not in before:
            lines.append(f"{name}: (new) -> {after[key]}")
        elif before[key] != after[key]:
            lines.append(f"{name}: {before[key]} -> {after[key]}")
    return lines


def refresh(names: list[str], write: bool) -> int:
    scratch = Path(tempfile.mkdtemp(prefix="fiber-locks-"))
    for name in names:
        changes = moved(lock_path(name), compile_lock(name, scratch))
        print(f"{name}: {len(changes)} pins moved" + "".join(f"\n    {line}" for line in changes))
        if write:
            shutil.copyfile(lock_path(name, scratch), lock_path(name))
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    compile_parser = verbs.add_parser("compile", help="bring the locks in line with pyproject.toml, keeping what it allows")
    compile_parser.add_argument("environments", nargs="*", metavar="ENV", help=f"of {', '.join(ENVIRONMENTS)} (all)")
    verify_parser = verbs.add_parser("verify", help="exit 1 if this environment differs from its lock")
    verify_parser.add_argument("lock", metavar="ENV", help="an environment's name, or a lock file")
    refresh_parser = verbs.add_parser("refresh", help="resolve afresh and say what moved")
    refresh_parser.add_argument("environments", nargs="*", metavar="ENV", help=f"of {', '.join(ENVIRONMENTS)} (all)")
    refresh_parser.add_argument("--write", action="store_true", help="replace the committed locks")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    if args.verb == "verify":
        return verify(lock_path(args.lock) if args.lock in ENVIRONMENTS else Path(args.lock).resolve())
    unknown = [name for name in args.environments if name not in ENVIRONMENTS]
    if unknown:
        parser.error(f"no environment {unknown[0]!r}: the environments are {', '.join(ENVIRONMENTS)}")
    names = args.environments or list(ENVIRONMENTS)
    if args.verb == "compile":
        for name in names:
            print(compile_lock(name, LOCKS).relative_to(ROOT))
        return 0
    return refresh(names, args.write)


if __name__ == "__main__":
    sys.exit(main())
