"""A located model's config and the dtype it runs in: what `fiberbench predict` and `extract-features` read of
transformers and torch before the weights load (`fiberbench.models` locates the model without them)."""

import json

import torch
from transformers import AutoConfig

from fiberbench.errors import DataError, UsageError
from fiberbench.models import ModelSource


def load_config(source: ModelSource):
    """The model's config: a local folder's (a `DataError` names a broken config.json), else the Hub's. Models of
    this project's own types are read once their package has registered them (`import fiberbench.modeling`)."""
    if source.folder is None:
        try:
            return AutoConfig.from_pretrained(source.name_or_path, **source.loading())
        except (OSError, ValueError) as error:
            raise UsageError(f"--model_name_or_path {source.name_or_path}: its config cannot be loaded ({error})") from error
    config_file = source.folder / "config.json"
    if not config_file.is_file():
        raise DataError(f"--model_name_or_path {source.name_or_path}: no config.json in it: not a saved model")
    try:
        json.loads(config_file.read_text(encoding="utf-8"))
        return AutoConfig.from_pretrained(source.folder, trust_remote_code=source.trust_remote_code)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DataError(f"{config_file}: not valid JSON ({error})") from error
    except (OSError, ValueError) as error:
        raise DataError(f"{config_file}: not a config transformers can read ({error})") from error


def inference_dtype(device):
    """The dtype a model runs in on `device`: bfloat16 on a GPU that supports it, else float32."""
    return torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
