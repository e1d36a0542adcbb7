"""A model named on the command line (`--model_name_or_path`): its config, how to load it, and its fingerprints.

`fiberbench predict` and `fiberbench extract-features` both take a local model folder or a Hub
model id, with `--revision` and `--trust_remote_code`, and record which model they ran (its
folder's files, or its Hub commit) so that a rerun resumes only with the same one. What they
share is here: `locate_model` checks the name before anything slow is imported (a mistyped folder
or an unreachable Hub is one line, in seconds: `check_model_name`, `model_loading_options`) and
gives the `ModelSource` that every `from_pretrained` of the run reads its options from; `load_config` reads its config;
`model_files` and `model_commit` are its fingerprints; `add_model_arguments` defines the flags
they read, and `inference_dtype` the dtype a model runs in.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fiberbench.errors import DataError, UsageError

if TYPE_CHECKING:
    import torch


def add_model_arguments(group, required: bool, remote_code_needed_by: str) -> None:
    """--model_name_or_path, --revision and --trust_remote_code (what `locate_model` reads) in a command's argument
    `group` (or parser); `remote_code_needed_by` says which models need no remote code."""
    group.add_argument(
        "--model_name_or_path",
        required=required,
        default=None,
        help="A Hub model id or a local model folder" + ("." if required else " (required)."),
    )
    group.add_argument("--revision", default=None, help="The model's branch, tag or commit on the Hub.")
    group.add_argument(
        "--trust_remote_code",
        action="store_true",
        help=f"Run the model's own code from its repo (not needed for {remote_code_needed_by}).",
    )


@dataclass(frozen=True)
class ModelSource:
    """Where a model is: a local folder or a Hub id (`name_or_path`, as given), and how `from_pretrained` reaches it.

    Args:
        name_or_path: --model_name_or_path, as given.
        revision: --revision (a Hub model's branch, tag or commit; None for a folder).
        trust_remote_code: --trust_remote_code.
        hub_options: `from_pretrained`'s options for a Hub id (`model_loading_options`:
            `local_files_only` when the Hub cannot be reached but the cache has it); empty for a folder.
    """

    name_or_path: str
    revision: str | None = None
    trust_remote_code: bool = False
    hub_options: dict = field(default_factory=dict)

    @property
    def folder(self) -> Path | None:
        """The local model folder, or None for a Hub id."""
        folder = Path(self.name_or_path).expanduser()
        return folder if folder.is_dir() else None

    def loading(self) -> dict:
        """`from_pretrained`'s keyword arguments for every file of this model (config, tokenizer, processor,
        weights)."""
        return {"revision": self.revision, "trust_remote_code": self.trust_remote_code, **self.hub_options}


def locate_model(name: str, revision: str | None = None, trust_remote_code: bool = False) -> ModelSource:
    """The model `name` (--model_name_or_path): a local folder, or a Hub id checked to load (in seconds).

    Raises:
        UsageError: --revision with a local folder, or a file given for the folder.
        DataError: a path to nothing, or a Hub id that is neither reachable nor cached.
    """
    folder = Path(name).expanduser()
    if folder.is_dir():
        if revision is not None:
            raise UsageError(f"--revision {revision} applies to a Hub model id, not the folder {name}")
        return ModelSource(name, None, trust_remote_code)
    if folder.exists():
        raise UsageError(f"--model_name_or_path {name} is a file; give a model folder or a Hub model id")
    # Checked in seconds: an unreachable Hub would otherwise retry for half a minute per file.
    hub_options = model_loading_options(name, flag="--model_name_or_path", revision=revision)
    return ModelSource(name, revision, trust_remote_code, hub_options)


def model_loading_options(repo_id: str, *, flag: str, revision: str | None = None) -> dict:
    """`from_pretrained` options for the Hub model `repo_id`, after checking in seconds that it can load.

    Without this, an unreachable Hub costs half a minute of retries and a screen of warnings
    before transformers' own error. When the Hub answers: no options. Offline (`HF_HUB_OFFLINE=1`)
    or unreachable, a model in the local cache loads from the cache alone (`local_files_only`);
    anything else, a name that is no Hub id included (a mistyped folder), is one `DataError` (like
    any input that cannot be read) naming `flag` and the ways out.
    """
    from huggingface_hub import constants, try_to_load_from_cache

    from fiberbench.hub import hub_problem

    check_model_name(repo_id, flag=flag)
    cached = isinstance(try_to_load_from_cache(repo_id, "config.json", revision=revision), str)
    problem = "HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else hub_problem(repo_id, revision=revision)
    if problem is None:
        return {}
    if cached:
        return {"local_files_only": True}
    raise DataError(
        f"{flag} {repo_id}: not a local folder, not in the Hugging Face cache ({constants.HF_HUB_CACHE}), and "
        f"{problem}. Ways out: pass a local model folder; or download it where the Hub can be reached "
        f"(`hf download {repo_id}`) into the cache that HF_HOME points to, then run with HF_HUB_OFFLINE=1."
    )


def check_model_name(name: str, *, flag: str) -> None:
    """A `DataError` for a model name that is no Hub id (a mistyped folder), checked without the network."""
    from fiberbench.hub import is_hub_id

    if not is_hub_id(name):
        raise DataError(f"{flag} {name}: no such folder (and not a Hub model id)")


def load_config(source: ModelSource):
    """The model's config: a local folder's (a DataError names a broken config.json), else the Hub's.

    A config that loads but cannot be used (e.g. it needs --trust_remote_code) is a UsageError.
    """
    # Imported once the model is known to be somewhere: transformers and torch take seconds to load.
    from transformers import AutoConfig
    from transformers.utils import CONFIG_NAME

    import fiberbench.modeling  # noqa: F401 - registers the FIBER config with AutoConfig

    folder = source.folder
    if folder is None:
        try:
            return AutoConfig.from_pretrained(source.name_or_path, **source.loading())
        except (OSError, ValueError) as error:
            name = source.name_or_path
            raise UsageError(f"--model_name_or_path {name}: its config cannot be loaded ({error})") from error
    config_file = folder / CONFIG_NAME
    if not config_file.is_file():
        raise DataError(f"--model_name_or_path {source.name_or_path}: no {CONFIG_NAME} in it: not a saved model")
    try:
        json.loads(config_file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DataError(f"{config_file}: not valid JSON ({error})") from error
    try:
        return AutoConfig.from_pretrained(folder, trust_remote_code=source.trust_remote_code)
    except (OSError, ValueError) as error:
        raise DataError(f"{config_file}: not a config transformers can read ({error})") from error


def model_files(name_or_path: str) -> dict[str, str] | None:
    """A local model folder's files with their sizes and hashes (`folder_fingerprint`); None for a Hub id.

    It takes the name, not a located `ModelSource`: a run hashes them before it reaches the Hub.
    """
    from fiberbench.files import folder_fingerprint

    folder = Path(name_or_path).expanduser()
    return folder_fingerprint(folder) if folder.is_dir() else None


def model_commit(source: ModelSource) -> str | None:
    """The commit of a Hub model (from the snapshot folder its config was cached in); None for a local folder."""
    if source.folder is not None:
        return None
    from huggingface_hub import hf_hub_download

    config_file = hf_hub_download(source.name_or_path, "config.json", revision=source.revision, **source.hub_options)
    # The Hub cache keeps each revision's files in snapshots/<commit hash>/.
    return Path(config_file).parent.name


def local_or_hub(name: str | None) -> str | None:
    """A local folder as its absolute path (the same however it was spelled), a Hub id as it is."""
    if name is None or not Path(name).expanduser().exists():
        return name
    return str(Path(name).expanduser().resolve())


def inference_dtype(device: "torch.device") -> "torch.dtype":
    """The dtype a model runs in on `device`: bfloat16 on a GPU that supports it, else float32."""
    import torch

    return torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
