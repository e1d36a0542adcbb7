"""The kinds of model `fiberbench predict` runs: the one registry (`KINDS`), and which kind a model is.

A kind is one row of `KINDS` (a `predictors.Kind`): its name (as --model_type gives it), how
messages name it, the class that loads it, and the `Predictor` subclass that runs it
(`predictors`, `prompted`, `video`), which says which configs it loads, whether it reads --prompt
and replies in words (`prompted`), and whether it reads the clips' videos (`reads_video`). Adding
a kind is writing its subclass and registering it here, one row in `KINDS`; the flags, the checks
and the run read everything else from the row and the class.

The checks that need the model's config (`choose_kind`, `check_max_new_tokens`) are here too:
all of them before the dataset or the weights are read.
"""

from pathlib import Path
from typing import TYPE_CHECKING

from fiberbench.errors import DataError, FiberbenchError, UsageError

from fiberbench.predict.predictors import FiberPredictor, Kind, Predictor, Seq2SeqPredictor
from fiberbench.predict.prompted import CausalPredictor
from fiberbench.predict.video import VideoPredictor

if TYPE_CHECKING:
    from fiberbench.models import ModelSource

    from fiberbench.predict.settings import PredictSettings

# Every kind, in the order a config is matched against them (`detect_kind`): a FIBER model first (its config is
# also a seq2seq LM's); then some configs (Gemma 3, Mllama, ...) are both image-text-to-text and causal LM, and the
# richer kind wins.
KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        Kind("fiber", FiberPredictor, "a FIBER model", "FiberT5ForConditionalGeneration"),
        Kind(
            "video",
            VideoPredictor,
            "a video-language model",
            "AutoModelForImageTextToText",
            "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING",
        ),
        Kind(
            "seq2seq",
            Seq2SeqPredictor,
            "a seq2seq LM",
            "AutoModelForSeq2SeqLM",
            "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING",
        ),
        Kind("causal", CausalPredictor, "a causal LM", "AutoModelForCausalLM", "MODEL_FOR_CAUSAL_LM_MAPPING"),
    )
}
# What the messages and --model_type read of the registry.
KIND_NAMES = {name: kind.described for name, kind in KINDS.items()}
PROMPTED_KINDS = tuple(name for name, kind in KINDS.items() if kind.predictor.prompted)
# The sequence length T5 was pre-trained on (Raffel et al., 2020, §3.1.2): the bound of --max_new_tokens for models
# whose relative positions state no maximum.
T5_TRAINED_LENGTH = 512


def detect_kind(config) -> str | None:
    """The kind of model `config` describes, or None when fiberbench predict runs no such model."""
    return next((name for name, kind in KINDS.items() if kind.describes(config)), None)


def choose_kind(settings: "PredictSettings", config) -> str:
    """--model_type, else the kind of the config; checked to load as that kind, with its weights in safetensors.

    Then the flags that only some kinds read. All of it before the dataset or the weights are read.
    """
    from transformers.utils import SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME

    name = settings.model_name_or_path
    detected = detect_kind(config)
    kind = settings.model_type or detected
    if kind is None:
        kinds = ", ".join(f"{known.described} ({known.model_class})" for known in KINDS.values())
        raise UsageError(
            f"--model_name_or_path {name}: model type {config.model_type!r} is none of the kinds fiberbench predict "
            f"runs: {kinds}"
        )
    declared = KINDS[kind]
    if not declared.loads(config):
        read = f"; its config makes it {KIND_NAMES[detected]}" if detected else ""
        raise UsageError(
            f"--model_type {kind}: {name} is a {config.model_type!r} model, which {declared.model_class} does not "
            f"load{read}"
        )
    weights = (SAFE_WEIGHTS_NAME, SAFE_WEIGHTS_INDEX_NAME)
    folder = Path(name).expanduser()
    if folder.is_dir() and not any((folder / file_name).is_file() for file_name in weights):
        # A pickle (pytorch_model.bin) can run any code when it is read.
        raise DataError(
            f"--model_name_or_path {name}: no {SAFE_WEIGHTS_NAME} in it; fiberbench predict reads only safetensors "
            "weights, never a pickle"
        )
    check_flags_of_kind(settings, declared)
    return kind


def check_flags_of_kind(settings: "PredictSettings", kind: Kind) -> None:
    """The flags that only some kinds read, given to a kind that does not read them (or, for a kind that reads
    videos, --video_dir missing): a UsageError naming the flag."""
    described, predictor = kind.described, kind.predictor
    if not predictor.prompted:
        if settings.prompt is not None:
            raise UsageError(f"--prompt is for causal and video-language models; {described} uses the paper's format")
        if settings.read_noun_phrases is not None:
            flag = "--read_noun_phrases" if settings.read_noun_phrases else "--no_read_noun_phrases"
            raise UsageError(
                f"{flag} is for causal and video-language models, which reply in words; {described} answers in "
                "the paper's format"
            )
    if predictor.reads_video and settings.video_dir is None:
        raise UsageError(
            f"{settings.model_name_or_path} is a video-language model: give --video_dir with the clips' videos "
            "(or --model_type causal to run it on the captions alone)"
        )
    if not predictor.reads_video:
        for flag in ("video_dir", "video_input", "num_frames", "fps", "max_frames", "skip_missing_videos"):
            if getattr(settings, flag) not in (None, False):
                raise UsageError(f"--{flag} is for video-language models; {described} does not read videos")


def check_max_new_tokens(settings: "PredictSettings", config) -> None:
    """--max_new_tokens within the positions of the model's text model; T5's relative positions state none, so
    there it is at most `T5_TRAINED_LENGTH`."""
    positions = getattr(config.get_text_config(), "max_position_embeddings", None)
    if positions is not None and settings.max_new_tokens > positions:
        raise UsageError(
            f"--max_new_tokens {settings.max_new_tokens}: more than the {positions} positions of "
            f"{settings.model_name_or_path}'s text model"
        )
    if positions is None and settings.max_new_tokens > T5_TRAINED_LENGTH:
        raise UsageError(
            f"--max_new_tokens {settings.max_new_tokens}: more than {settings.model_name_or_path} generates (it states "
            f"no maximum of positions: at most {T5_TRAINED_LENGTH}, the length T5 was trained on)"
        )


def make_predictor(settings: "PredictSettings", kind: str, config, source: "ModelSource") -> Predictor:
    """The predictor of `kind`, with its tokenizer or processor (not its weights yet)."""
    try:
        return KINDS[kind].predictor(KINDS[kind], settings, source.loading(), config)
    except FiberbenchError:
        raise
    except (OSError, ValueError) as error:
        raise DataError(
            f"--model_name_or_path {settings.model_name_or_path}: cannot read its tokenizer or processor ({error})"
        ) from error


def predictor_of(settings: "PredictSettings") -> Predictor:
    """The predictor `fiberbench predict` makes for `settings`, as a run makes it (its kind chosen and checked, the
    kind's default --prompt), before its texts are rendered and its weights loaded: for the tests and benchmarks that
    drive a predictor directly."""
    from fiberbench.models import load_config, locate_model

    source = locate_model(settings.model_name_or_path, settings.revision, settings.trust_remote_code)
    config = load_config(source)
    kind = choose_kind(settings, config)
    check_max_new_tokens(settings, config)
    return make_predictor(settings.for_kind(KINDS[kind].predictor.prompted), kind, config, source)
