"""`fiberbench predict --reread PREDICTIONS_FILE`: a predictions file's replies read again, without the model.

A causal or video-language model's predictions keep its replies (`raw`, one per beam). Reading
them again with other reader settings (`--read_noun_phrases` or `--no_read_noun_phrases`,
`--spacy_model`) or another beam choice (`--only_noun_phrases`) gives, in `--output_file`, the
rows and metadata that `fiberbench predict` with those settings writes, because it is the same
code: `fiberbench.answers.Answerer`. The masked captions come from
the dataset split named in the file's metadata, which must still hold the same clips and masked
captions: its fingerprint must equal the one recorded, as for a resumed run. Metadata that is not
in predict's shape is one line naming the field.
"""

import copy
import logging
from dataclasses import fields

from fiberbench.answers import Answerer
from fiberbench.errors import DataError, UsageError
from fiberbench.predictions import KEY_FIELDS

from .arguments import parse_settings
from .clips import clip_keys, dataset_fingerprint, load_split
from .kinds import KIND_NAMES, PROMPTED_KINDS
from .outputs import SKIPPED, PredictionsFile, check_settings_fields, metadata_path
from .settings import PredictSettings

logger = logging.getLogger(__name__)

# The flags --reread reads; every other one belongs to generation, which --reread does not do.
REREAD_FLAGS = (
    "reread",
    "output_file",
    "overwrite_output_file",
    "read_noun_phrases",
    "only_noun_phrases",
    "spacy_model",
)
# The recorded settings --reread reads: (section, field) -> the JSON types it may have.
READ_SETTINGS = {
    ("model", "kind"): (str,),
    ("dataset", "name"): (str, type(None)),
    ("dataset", "config"): (str,),
    ("dataset", "split"): (str,),
    ("dataset", "clips"): (int,),
    ("dataset", "fingerprint"): (str,),
    ("decoding", "num_beams"): (int,),
}


def check_reread_flags(settings: PredictSettings) -> None:
    """Refuse a flag that --reread would ignore (model, data, prompt, generation): a UsageError naming it."""
    defaults = parse_settings([])
    names = [field.name for field in fields(PredictSettings) if field.name not in REREAD_FLAGS]
    given = [name for name in names if getattr(settings, name) != getattr(defaults, name)]
    if given:
        raise UsageError(
            f"--{given[0]} does not apply to --reread, which reads the replies kept in {settings.reread} again with "
            "the model, data and prompt recorded in its metadata"
        )


def reread(settings: PredictSettings) -> int:
    """Read the replies of `settings.reread` again into `settings.output_file` (see the module's docstring)."""
    check_reread_flags(settings)
    source = settings.reread
    if not source.is_file():
        raise DataError(f"--reread {source}: no such file")
    if not metadata_path(source).is_file():
        raise DataError(
            f"--reread {source}: no {metadata_path(source).name} beside it: not a finished fiberbench predict output"
        )
    inputs = [source, metadata_path(source)]
    output = PredictionsFile(settings.output_file, {}, overwrite=settings.overwrite_output_file)
    output.check_ours(inputs)
    recorded, rows = PredictionsFile(source, settings={}).read_finished()
    check_settings_fields(recorded, READ_SETTINGS, metadata_path(source))
    kind = recorded["model"]["kind"]
    if kind not in PROMPTED_KINDS:
        made_by = KIND_NAMES.get(kind, f"a model of kind {kind!r}")
        raise UsageError(
            f"--reread {source}: its predictions were made by {made_by}, which keeps no replies (only causal and "
            "video-language models reply in words)"
        )
    for row, where in rows:
        if "raw" not in row:
            raise DataError(f"{where}: field 'raw' is missing: the model's replies were not kept to be read again")
        if not row["raw"] and not row.get(SKIPPED):
            raise DataError(f"{where}: field 'raw' is empty, but the clip was not skipped for a missing video")

    dataset = recorded["dataset"]
    split = load_split(dataset["name"], dataset["split"], dataset["clips"], dataset["config"])
    keys = [tuple(row[field] for field in KEY_FIELDS) for row, _ in rows]
    expected = clip_keys(split, f"{source}'s dataset split")
    for (row, where), key, expected_key in zip(rows, keys, expected):
        if key != expected_key:
            raise DataError(
                f"{where}: clip {key} is not the clip {expected_key} of the dataset at that row: the dataset in the "
                "metadata changed since the predictions were made"
            )
    if len(keys) != len(expected):
        raise DataError(f"{source}: {len(keys)} rows for the {len(expected)} clips its metadata names")
    fingerprint, found = dataset["fingerprint"], dataset_fingerprint(split, reads_features=False)
    if found != fingerprint:
        raise DataError(
            f"{source}: the masked captions of {dataset['name'] or 'the bundled sample'}, split {dataset['split']}, "
            f"changed since the predictions were made (fingerprint {found[:19]}... now, {fingerprint[:19]}... in "
            f"{metadata_path(source).name}): the replies answer other blanks; predict again"
        )

    num_beams = recorded["decoding"]["num_beams"]
    answerer = Answerer.load(
        num_beams,
        prompted=True,
        only_noun_phrases=settings.only_noun_phrases,
        read_noun_phrases=settings.read_noun_phrases,
        spacy_model=settings.spacy_model,
    )
    # Clips skipped for a missing video have no reply: they keep their empty answer.
    present = [index for index, (row, _) in enumerate(rows) if not row.get(SKIPPED)]
    all_captions = split["masked_caption"]
    masked_captions = [all_captions[index] for index in present]
    replies = [rows[index][0]["raw"] for index in present]
    answered = dict(zip(present, answerer.fields(masked_captions, replies)))
    records = [row | answered.get(index, {}) for index, (row, _) in enumerate(rows)]
    recorded = copy.deepcopy(recorded)
    recorded["decoding"] |= answerer.decoding
    recorded["reader"] = answerer.reader
    predictions = output.with_settings(recorded)
    with predictions.open(inputs):
        predictions.append(0, records)
        predictions.merge(keys, num_beams)
    changed = sum(record["prediction"] != row["prediction"] for record, (row, _) in zip(records, rows))
    logger.info(
        "Read the replies of %s again into %s: %d of %d answers changed",
        source,
        settings.output_file,
        changed,
        len(rows),
    )
    return 0
