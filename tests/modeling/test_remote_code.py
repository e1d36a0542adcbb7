"""A saved FIBER model runs with `trust_remote_code=True` where only torch and transformers are installed."""

import importlib.metadata
import json
import os
import subprocess
import venv
from pathlib import Path

import numpy as np
import pytest
import torch
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from fiberbench.modeling.noun_phrases import SPACY_INSTALL_COMMAND

REMOTE_CODE_SCRIPT = """
import importlib.util, json, sys
import numpy as np
from transformers import AutoModelForSeq2SeqLM, AutoProcessor

folder = sys.argv[1]
model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True)
processor = AutoProcessor.from_pretrained(folder, trust_remote_code=True)
inputs = json.load(open(f"{folder}/inputs.json"))
videos = [np.load(f"{folder}/video_{i}.npy") for i in range(len(inputs["captions"]))]
batch = processor(inputs["captions"], video_features=videos, labels=inputs["labels"])
logits = model(**batch).logits
report = {"modules": [type(model).__module__, type(processor).__module__], "logits": logits.tolist(),
          "imported_fiberbench": any(name.split(".")[0] == "fiberbench" for name in sys.modules),
          "findable": {name: importlib.util.find_spec(name) is not None for name in ("spacy", "fiberbench")},
          "filled": model.fill_blanks(processor, inputs["captions"], videos, only_noun_phrases=False,
                                      return_candidates=True)}
try:
    model.fill_blanks(processor, inputs["captions"], video_features=videos)
except ImportError as error:
    report["noun_phrase_error"] = str(error)
print(json.dumps(report))
"""


def make_venv_with_only(path: Path, *names: str) -> Path:
    """A virtual environment holding exactly `names` and what they need (their requirements without extras,
    recursively), linked from this interpreter's installs: nothing else installed here (spaCy, fiberbench) can be
    imported there, and nothing is downloaded. Returns its python."""
    venv.EnvBuilder(with_pip=False).create(path)
    python = path / "bin" / "python"
    site_packages = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        check=True, capture_output=True, text=True).stdout.strip())
    found, pending = {}, list(names)
    while pending:
        name = canonicalize_name(pending.pop())
        if name not in found:
            found[name] = importlib.metadata.distribution(name)
            pending += [requirement.name for requirement in map(Requirement, found[name].requires or [])
                        if requirement.marker is None or requirement.marker.evaluate({"extra": ""})]
    for distribution in found.values():
        top_level = {file.parts[0] for file in distribution.files or [] if file.parts[0] not in ("..", "__pycache__")}
        for name in (name for name in top_level if not name.endswith(".pth")):
            if Path(distribution.locate_file(name)).exists():
                (site_packages / name).symlink_to(distribution.locate_file(name))
    return python


@pytest.mark.slow
def test_trust_remote_code_without_spacy_or_fiberbench(tmp_path, make_model, processor, sample_clips):
    python, folder, model = make_venv_with_only(tmp_path / "venv", "torch", "transformers"), tmp_path / "model", \
        make_model("early")
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    captions, labels = [clip["masked_caption"] for clip in sample_clips], [clip["label"] for clip in sample_clips]
    videos = [clip["video"] for clip in sample_clips]
    (folder / "inputs.json").write_text(json.dumps({"captions": captions, "labels": labels}))
    for index, video in enumerate(videos):
        np.save(folder / f"video_{index}.npy", video)
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    environment |= {"HF_MODULES_CACHE": str(tmp_path / "modules"), "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([python, "-c", REMOTE_CODE_SCRIPT, folder], cwd=tmp_path, env=environment,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    remote = json.loads(run.stdout.strip().splitlines()[-1])
    assert remote["findable"] == {"spacy": False, "fiberbench": False} and remote["imported_fiberbench"] is False
    assert all(module.startswith("transformers_modules.") for module in remote["modules"])
    batch = processor(captions, video_features=videos, labels=labels)
    torch.testing.assert_close(torch.tensor(remote["logits"]), model(**batch).logits, rtol=0, atol=1e-6)
    filled = model.fill_blanks(processor, captions, videos, only_noun_phrases=False, return_candidates=True)
    assert remote["filled"] == [[answer, candidates] for answer, candidates in filled]
    # The noun-phrase choice is the one part that needs spaCy: one error that says how to install it.
    assert SPACY_INSTALL_COMMAND in remote["noun_phrase_error"]
    assert "only_noun_phrases=False" in remote["noun_phrase_error"]
