"""A model named on the command line (`--model_name_or_path`): its flags, where it is, its config and fingerprints.

`fiberbench predict`, `fiberbench extract-features` and training take a local folder or a Hub id, with `--revision`
and `--trust_remote_code`. `locate_model` checks the name in seconds, before any weights load (a mistyped folder or
an unreachable Hub is one line), and gives the `ModelSource` every `from_pretrained` of a run reads its options from;
its `describe()` (a folder's files, a Hub model's commit) says which model a run read. It loads neither torch nor
transformers (`fiberbench.model_config` reads the config), so that `predict` checks the name before they load.
"""

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from huggingface_hub import constants, hf_hub_download, try_to_load_from_cache

from fiberbench.errors import DataError, UsageError
from fiberbench.hub import hub_problem, is_hub_id


def add_model_arguments(group, required: bool, remote_code_needed_by: str) -> None:
    """--model_name_or_path, --revision and --trust_remote_code in a command's argument `group`; `remote_code_needed_by`
    says which models need no remote code."""
    group.add_argument(
        "--model_name_or_path", required=required, default=None,
        help="A Hub model id or a local model folder" + ("." if required else " (required)."),
    )
    group.add_argument("--revision", default=None, help="The model's branch, tag or commit on the Hub.")
    group.add_argument(
        "--trust_remote_code", action="store_true",
        help=f"Run the model's own code from its repo (not needed for {remote_code_needed_by}).",
    )


@dataclass(frozen=True)
class ModelSource:
    """A local folder or a Hub id (`name_or_path`, as given), and the options `from_pretrained` reaches it with
    (`hub_options`: `local_files_only` when the Hub cannot be reached but the cache has it)."""

    name_or_path: str
    revision: str | None = None
    trust_remote_code: bool = False
    hub_options: dict = field(default_factory=dict)

    @property
    def folder(self) -> Path | None:
        folder = Path(self.name_or_path).expanduser()
        return folder if folder.is_dir() else None

    def loading(self) -> dict:
        """`from_pretrained`'s keyword arguments for every file of this model."""
        return {"revision": self.revision, "trust_remote_code": self.trust_remote_code, **self.hub_options}

    def describe(self) -> dict:
        """Which model a run read, for its record: where (a folder as its absolute path), the revision, and the Hub
        commit or the local folder's files (re-saved weights are another model)."""
        where = str(self.folder.resolve()) if self.folder else self.name_or_path  # a folder however it was spelled
        return {"name_or_path": where, "revision": self.revision,
                "commit": model_commit(self), "files": model_files(self.name_or_path)}


def locate_model(name: str, revision: str | None = None, trust_remote_code: bool = False) -> ModelSource:
    """The model `name`: a local folder, or a Hub id checked to load (a `UsageError` or `DataError` otherwise)."""
    folder = Path(name).expanduser()
    if folder.is_dir():
        if revision is not None:
            raise UsageError(f"--revision {revision} applies to a Hub model id, not the folder {name}")
        return ModelSource(name, None, trust_remote_code)
    if folder.exists():
        raise UsageError(f"--model_name_or_path {name} is a file; give a model folder or a Hub model id")
    hub_options = model_loading_options(name, flag="--model_name_or_path", revision=revision)
    return ModelSource(name, revision, trust_remote_code, hub_options)


def model_loading_options(repo_id: str, *, flag: str, revision: str | None = None) -> dict:
    """`from_pretrained` options for the Hub model `repo_id`, checked in seconds to load (an unreachable Hub would
    cost half a minute of retries): none when the Hub answers, `local_files_only` when only the cache has it; else a
    `DataError` naming `flag` and the ways out."""
    check_model_name(repo_id, flag=flag)
    problem = "HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else hub_problem(repo_id, revision=revision)
    if problem is None:
        return {}
    if isinstance(try_to_load_from_cache(repo_id, "config.json", revision=revision), str):
        return {"local_files_only": True}
    raise DataError(
        f"{flag} {repo_id}: not a local folder, not in the Hugging Face cache ({constants.HF_HUB_CACHE}), and "
        f"{problem}. Ways out: pass a local model folder; or download it where the Hub can be reached "
        f"(`hf download {repo_id}`) into the cache that HF_HOME points to, then run with HF_HUB_OFFLINE=1."
    )


def check_model_name(name: str, *, flag: str) -> None:
    """A `DataError` for a model name that is no Hub id (a mistyped folder), checked without the network."""
    if not is_hub_id(name):
        raise DataError(f"{flag} {name}: no such folder (and not a Hub model id)")


def model_files(name_or_path: str) -> dict[str, str] | None:
    """A local model folder's files (hidden ones left out) -> size and sha256; None for a Hub id."""
    folder = Path(name_or_path).expanduser()
    if not folder.is_dir():
        return None
    files = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(folder).parts):
            with path.open("rb") as file:
                digest = hashlib.file_digest(file, "sha256").hexdigest()
            files[path.relative_to(folder).as_posix()] = f"{path.stat().st_size} bytes, sha256:{digest}"
    return files


def model_commit(source: ModelSource) -> str | None:
    """The commit of a Hub model (the snapshot folder its config is cached in); None for a local folder."""
    if source.folder is not None:
        return None
    config_file = hf_hub_download(source.name_or_path, "config.json", revision=source.revision, **source.hub_options)
    return Path(config_file).parent.name  # the Hub cache keeps each revision's files in snapshots/<commit>/
