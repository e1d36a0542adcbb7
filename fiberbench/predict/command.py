"""`fiberbench predict`: a model's answers to every blank of a FIBER split, as a file for `fiberbench evaluate`.

Everything that can refuse the run is checked before the dataset or the model's weights are read
where it can be: the flags, the model's config (its kind, the class that loads it, its
safetensors weights); then, before any generation, the dataset split, each clip's video (opened),
and an existing output (resumed only when it was written with the same settings). Then each
process (several under `accelerate launch`) predicts its share of the clips not done yet, batch
by batch, each batch written as a part file, and the first process merges all rows in dataset
order (see `outputs`).
"""

import argparse
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fiberbench.cli import default_num_workers, non_negative_int, positive_float, positive_int
from fiberbench.errors import DataError, FiberbenchError, UsageError

from fiberbench.prompts import DEFAULT_PROMPT, check_template
from fiberbench.replies import load_reader_pipeline, read_answers, reader_settings

if TYPE_CHECKING:
    import datasets
    import torch
    from spacy.language import Language
    from transformers import PretrainedConfig

    from fiberbench.data.fiber.validation import ClipKey

    from .kinds import Predictor
    from fiberbench.videos import ClipVideo, FrameSampling

logger = logging.getLogger(__name__)

# The kinds of model (`kinds.PREDICTORS` runs each), as messages name them.
KIND_NAMES = {
    "fiber": "a FIBER model",
    "seq2seq": "a seq2seq LM",
    "causal": "a causal LM",
    "video": "a video-language model",
}
# The kinds prompted in words (`--prompt`), whose replies the answer reader reads (`replies`).
PROMPTED_KINDS = ("causal", "video")
DEFAULT_NUM_FRAMES = 8
# The sequence length T5 was pre-trained on (Raffel et al., 2020, §3.1.2): the bound of --max_new_tokens for models
# whose relative positions state no maximum.
T5_TRAINED_LENGTH = 512


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "The kind of model is read from its config: FIBER models (I3D features, the paper's decoding), seq2seq LMs "
        "(the paper's zero-shot format), causal LMs (--prompt, through the chat template when there is one) and "
        "video-language models (AutoModelForImageTextToText: frames of each clip's video in --video_dir, as a video "
        "when the processor has a video processor, else as images; then --prompt). The answer in a causal or "
        "video-language model's reply is read as a person would: the filled-in caption, 'the answer is X', a quoted "
        "or bold phrase, else the first sentence (fiberbench.replies); the replies are kept, and --reread "
        "reads them again. "
        "Data-parallel: accelerate launch --multi_gpu --num_processes N -m fiberbench.cli predict ... "
        f"The default --prompt: {DEFAULT_PROMPT!r}"
    )
    model = parser.add_argument_group("model")
    model.add_argument("--model_name_or_path", default=None, help="A Hub model id or a local model folder (required).")
    model.add_argument("--revision", default=None, help="The model's branch, tag or commit on the Hub.")
    model.add_argument(
        "--model_type", choices=list(KIND_NAMES), default=None, help="Override the kind read from the config."
    )
    model.add_argument(
        "--device_map",
        default=None,
        help="Spread the model over this machine's GPUs (auto, balanced, sequential; Accelerate places the layers): "
        "for a model too big for one GPU, in one process. For many clips at once on many GPUs, accelerate launch.",
    )
    model.add_argument(
        "--trust_remote_code",
        action="store_true",
        help="Run the model's own code from its repo (not needed for FIBER).",
    )
    data = parser.add_argument_group("data")
    data.add_argument(
        "--dataset_name",
        default=None,
        help="A FIBER dataset folder or Hub id; the bundled SYNTHETIC sample if omitted.",
    )
    data.add_argument("--split", default="test", help="The split to predict (default: test).")
    data.add_argument("--max_predict_samples", type=positive_int, default=None, help="Predict only the first N clips.")
    data.add_argument(
        "--video_dir",
        type=Path,
        default=None,
        help="Video-language models: the clips' videos, VIDEO_ID_START_END.mp4 (clip ids) or whole VIDEO_ID.mp4.",
    )
    data.add_argument(
        "--video_input",
        choices=("auto", "video", "images"),
        default=None,
        help="Video-language models: the frames as a video (the processor's video processor, the frames' times as "
        "video metadata) or as images (its image processor). Default auto: a video when the processor has a video "
        "processor, else images.",
    )
    data.add_argument(
        "--num_frames",
        type=positive_int,
        default=None,
        help="Frames per clip, at the centres of equal parts of it (default: the video processor's own sampling "
        f"where it has one, else {DEFAULT_NUM_FRAMES}).",
    )
    data.add_argument(
        "--fps",
        type=positive_float,
        default=None,
        help="Instead of --num_frames: frames per second of clip (every frame, if the video has fewer).",
    )
    data.add_argument("--max_frames", type=positive_int, default=None, help="With --fps: frames per clip at most.")
    data.add_argument(
        "--skip_missing_videos",
        action="store_true",
        help="Predict an empty answer for clips without a video file (counted and listed in the metadata).",
    )
    decoding = parser.add_argument_group("decoding")
    decoding.add_argument(
        "--prompt", default=None, help="Causal and video-language models: a template holding {masked_caption}."
    )
    decoding.add_argument(
        "--num_beams",
        type=positive_int,
        default=None,
        help="Beams (default: the paper's for FIBER and seq2seq LMs, else 1).",
    )
    decoding.add_argument(
        "--max_new_tokens",
        type=positive_int,
        default=10,
        help="Tokens generated at most (default 10; at most the model's positions).",
    )
    # Spelled as HfArgumentParser spells a boolean that is on by default: --X, and --no_X to turn it off.
    decoding.add_argument(
        "--only_noun_phrases",
        action="store_true",
        default=True,
        help="With several beams, answer with the first that is a noun phrase in the blank (default, as the paper).",
    )
    decoding.add_argument(
        "--no_only_noun_phrases", dest="only_noun_phrases", action="store_false", help="Answer with the first beam."
    )
    decoding.add_argument(
        "--read_noun_phrases",
        action="store_true",
        default=None,
        help="Causal and video-language models: when the answer read in a reply is not a noun phrase in the blank, "
        "answer with the first noun phrase in it that is (default: on; it needs an English spaCy pipeline, and "
        "without one the run is refused).",
    )
    decoding.add_argument(
        "--no_read_noun_phrases",
        dest="read_noun_phrases",
        action="store_false",
        help="Answer with what the reader reads in the reply, noun phrase or not (recorded in the metadata).",
    )
    decoding.add_argument(
        "--spacy_model",
        default=None,
        help="spaCy pipeline of the noun-phrase checks (default: $FIBERBENCH_SPACY_MODEL, else en_core_web_trf, else "
        "the largest English one here).",
    )
    decoding.add_argument(
        "--per_device_eval_batch_size",
        type=positive_int,
        default=16,
        help="Clips per generate call and process (default 16).",
    )
    decoding.add_argument(
        "--dataloader_num_workers",
        type=non_negative_int,
        default=None,
        help="Processes making the next batches' inputs (decoding clips, processing frames, tokenizing) while the "
        "model generates, per process (default: its share of the CPU cores, less one; 0 makes them in the process "
        "itself). The predictions are the same with any number.",
    )
    output = parser.add_argument_group("output")
    output.add_argument(
        "--output_file",
        type=jsonl_file,
        default=Path("predictions.jsonl"),
        help="The predictions, JSON Lines (a .jsonl file); its settings go to NAME.metadata.json beside it. Rerun to "
        "resume.",
    )
    output.add_argument(
        "--overwrite_output_file", action="store_true", help="Replace an output made with other settings."
    )
    output.add_argument(
        "--reread",
        type=Path,
        default=None,
        metavar="PREDICTIONS_FILE",
        help="Instead of running a model: read the replies kept in this causal or video-language model's predictions "
        "again (with --read_noun_phrases, --spacy_model, --only_noun_phrases as given) into --output_file.",
    )


def jsonl_file(text: str) -> Path:
    """argparse type of --output_file: a `.jsonl` file, the format written (and the one `evaluate` reads as such)."""
    if Path(text).suffix != ".jsonl":
        raise argparse.ArgumentTypeError(f"predictions are JSON Lines: name a .jsonl file, got {text!r}")
    return Path(text)


def check_flags(args) -> None:
    """The flag values on their own (UsageError), before anything is loaded."""
    if args.model_name_or_path is None:
        raise UsageError("--model_name_or_path is required (or --reread, to read a predictions file's replies again)")
    if args.prompt is not None:
        try:
            check_template(args.prompt)
        except ValueError as error:
            raise UsageError(str(error)) from error
    if args.device_map is not None and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise UsageError(
            "--device_map spreads one model over the GPUs in one process; under accelerate launch each process holds "
            "a copy of the model: use one or the other"
        )
    if args.device_map is not None:
        check_device_map(args.device_map)
    if args.num_frames is not None and args.fps is not None:
        raise UsageError("--num_frames and --fps are two ways to choose the frames: give one")
    if args.max_frames is not None and args.fps is None:
        raise UsageError("--max_frames applies to --fps (with --num_frames, the number of frames is fixed)")
    if args.video_dir is not None and args.video_dir.exists() and not args.video_dir.is_dir():
        raise UsageError(f"--video_dir {args.video_dir} is a file; give the folder of the clips' videos")
    if args.video_dir is not None and not args.video_dir.is_dir():
        raise DataError(f"--video_dir {args.video_dir}: no such folder")


# --device_map's ways to spread a model (Accelerate's); any other value names one device.
DEVICE_MAP_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")


def check_device_map(device_map: str) -> None:
    """--device_map: a way to spread the model, or a device this torch can put it on (a GPU of a CPU-only build, or
    one past the last, is refused here rather than failing as the weights load)."""
    if device_map in DEVICE_MAP_STRATEGIES:
        return
    import torch

    try:
        device = torch.device(device_map)
    except (RuntimeError, ValueError):
        raise UsageError(
            f"--device_map {device_map}: neither a way to spread the model ({', '.join(DEVICE_MAP_STRATEGIES)}) nor a "
            "device (cpu, cuda:0, ...)"
        ) from None
    if device.type == "cpu":
        return
    accelerator = torch.accelerator.current_accelerator()
    if accelerator is None or accelerator.type != device.type:
        raise UsageError(
            f"--device_map {device_map}: this torch ({torch.__version__}) has no {device.type} device here (a build "
            "without it, or none visible); leave --device_map out, or give cpu or auto"
        )
    count = torch.accelerator.device_count()
    if device.index is not None and device.index >= count:
        raise UsageError(
            f"--device_map {device_map}: this machine has {count} {device.type} device{'s' * (count != 1)} "
            f"({device.type}:0 to {device.type}:{count - 1})"
        )


def load_config(args):
    """The model's config: a local folder's (a DataError names a broken config.json), else the Hub's.

    A path to nothing, or a Hub id that is neither reachable nor cached, is a DataError naming it
    (in seconds: `fiberbench.hub.model_loading_options`); a config that loads but cannot be used
    (e.g. it needs --trust_remote_code) is a UsageError.
    """
    name = args.model_name_or_path
    folder = Path(name).expanduser()
    args.hub_options = {}  # from_pretrained's options for a Hub id, set below
    if folder.is_dir():
        if args.revision is not None:
            raise UsageError(f"--revision {args.revision} applies to a Hub model id, not the folder {name}")
        return local_config(args, folder)
    if folder.exists():
        raise UsageError(f"--model_name_or_path {name} is a file; give a model folder or a Hub model id")
    from fiberbench.hub import model_loading_options

    # Checked in seconds: an unreachable Hub would otherwise retry for half a minute per file.
    args.hub_options = model_loading_options(name, flag="--model_name_or_path", revision=args.revision)
    # Imported once the model is known to be somewhere: transformers and torch take seconds to load.
    from transformers import AutoConfig

    import fiberbench.modeling  # noqa: F401 - registers the FIBER config with AutoConfig

    try:
        return AutoConfig.from_pretrained(
            name, revision=args.revision, trust_remote_code=args.trust_remote_code, **args.hub_options
        )
    except (OSError, ValueError) as error:
        raise UsageError(f"--model_name_or_path {name}: its config cannot be loaded ({error})") from error


def local_config(args, folder: Path):
    """The config of a local model folder; a missing or broken config.json is a DataError naming it."""
    from transformers import AutoConfig
    from transformers.utils import CONFIG_NAME

    import fiberbench.modeling  # noqa: F401 - registers the FIBER config with AutoConfig

    config_file = folder / CONFIG_NAME
    if not config_file.is_file():
        raise DataError(f"--model_name_or_path {args.model_name_or_path}: no {CONFIG_NAME} in it: not a saved model")
    try:
        json.loads(config_file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DataError(f"{config_file}: not valid JSON ({error})") from error
    try:
        return AutoConfig.from_pretrained(folder, trust_remote_code=args.trust_remote_code)
    except (OSError, ValueError) as error:
        raise DataError(f"{config_file}: not a config transformers can read ({error})") from error


def choose_kind(args, config) -> str:
    """--model_type, else the kind of the config; checked to load as that kind, with its weights in safetensors.

    Then the flags that only some kinds read. All of it before the dataset or the weights are read.
    """
    from transformers.utils import SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME

    from .kinds import detect_kind, loads_as, model_class

    name = args.model_name_or_path
    detected = detect_kind(config)
    kind = args.model_type or detected
    if kind is None:
        raise UsageError(
            f"--model_name_or_path {name}: model type {config.model_type!r} is none of the kinds "
            "fiberbench predict runs (FIBER models, and the models of AutoModelForSeq2SeqLM, AutoModelForCausalLM "
            "and AutoModelForImageTextToText)"
        )
    if not loads_as(kind, config):
        read = f"; its config makes it {KIND_NAMES[detected]}" if detected else ""
        raise UsageError(
            f"--model_type {kind}: {name} is a {config.model_type!r} model, which {model_class(kind)} does not "
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
    if kind not in PROMPTED_KINDS:
        if args.prompt is not None:
            raise UsageError(
                f"--prompt is for causal and video-language models; {KIND_NAMES[kind]} uses the paper's format"
            )
        if args.read_noun_phrases is not None:
            flag = "--read_noun_phrases" if args.read_noun_phrases else "--no_read_noun_phrases"
            raise UsageError(
                f"{flag} is for causal and video-language models, which reply in words; {KIND_NAMES[kind]} answers in "
                "the paper's format"
            )
    if kind == "video" and args.video_dir is None:
        raise UsageError(
            f"{name} is a video-language model: give --video_dir with the clips' videos "
            "(or --model_type causal to run it on the captions alone)"
        )
    for flag in ("video_dir", "video_input", "num_frames", "fps", "max_frames", "skip_missing_videos"):
        if kind != "video" and getattr(args, flag) not in (None, False):
            raise UsageError(f"--{flag} is for video-language models; {KIND_NAMES[kind]} does not read videos")
    return kind


def check_max_new_tokens(args, config) -> None:
    """--max_new_tokens within the positions of the model's text model; T5's relative positions state none, so
    there it is at most `T5_TRAINED_LENGTH`."""
    positions = getattr(config.get_text_config(), "max_position_embeddings", None)
    if positions is not None and args.max_new_tokens > positions:
        raise UsageError(
            f"--max_new_tokens {args.max_new_tokens}: more than the {positions} positions of "
            f"{args.model_name_or_path}'s text model"
        )
    if positions is None and args.max_new_tokens > T5_TRAINED_LENGTH:
        raise UsageError(
            f"--max_new_tokens {args.max_new_tokens}: more than {args.model_name_or_path} generates (it states no "
            f"maximum of positions: at most {T5_TRAINED_LENGTH}, the length T5 was trained on)"
        )


def make_predictor(args, kind: str, config) -> "Predictor":
    """The predictor of `kind`, with its tokenizer or processor (not its weights yet)."""
    from .kinds import PREDICTORS

    loading = {"revision": args.revision, "trust_remote_code": args.trust_remote_code, **args.hub_options}
    try:
        return PREDICTORS[kind](args, loading, config)
    except FiberbenchError:
        raise
    except (OSError, ValueError) as error:
        raise DataError(
            f"--model_name_or_path {args.model_name_or_path}: cannot read its tokenizer or processor ({error})"
        ) from error


def model_files(args) -> dict[str, str] | None:
    """A local model folder's files with their sizes and hashes (`folder_fingerprint`); None for a Hub id."""
    from fiberbench.files import folder_fingerprint

    folder = Path(args.model_name_or_path).expanduser()
    return folder_fingerprint(folder) if folder.is_dir() else None


def model_commit(args) -> str | None:
    """The commit of a Hub model (from the snapshot folder its config was cached in); None for a local folder."""
    if Path(args.model_name_or_path).expanduser().is_dir():
        return None
    from huggingface_hub import hf_hub_download

    config_file = hf_hub_download(args.model_name_or_path, "config.json", revision=args.revision, **args.hub_options)
    # The Hub cache keeps each revision's files in snapshots/<commit hash>/.
    return Path(config_file).parent.name


def load_split(args, config_name: str):
    """The clips to predict: the split of the dataset (or of the bundled sample), first --max_predict_samples."""
    from fiberbench.data import load_fiber

    splits = load_fiber(args.dataset_name, config_name)
    if args.split not in splits:
        raise DataError(
            f"--dataset_name {args.dataset_name or '(the bundled sample)'} has no split {args.split!r} "
            f"(splits: {', '.join(splits)})"
        )
    split = splits[args.split]
    if args.max_predict_samples is not None:
        split = split.select(range(min(args.max_predict_samples, len(split))))
    return split


def clip_keys(split, described: str) -> "list[ClipKey]":
    """Each row's clip (video_id, video_start_time, video_end_time); a clip twice in the split is a DataError."""
    keys = list(zip(split["video_id"], split["video_start_time"], split["video_end_time"]))
    first_row = {}
    for index, key in enumerate(keys):
        if key in first_row:
            raise DataError(f"{described}: rows {first_row[key]} and {index} are the same clip {key}")
        first_row[key] = index
    return keys


def find_videos(
    args, keys: "list[ClipKey]", sampling: "FrameSampling"
) -> "tuple[list[ClipVideo | None], list[int | None]]":
    """Each clip's video, checked to give the frames of `sampling` (`check_video`), and how many frames it gives;
    None for a missing one with --skip_missing_videos.

    Every video is opened here, before any work, so that a bad one is one error line on every
    process at once, not a failure of one process in the middle of a run.
    """
    from tqdm.auto import tqdm

    from fiberbench.videos import check_video, expected_names, find_clip_video

    videos = [find_clip_video(args.video_dir, *key) for key in keys]
    missing = [key for key, video in zip(keys, videos) if video is None]
    if missing and not args.skip_missing_videos:
        raise DataError(
            f"--video_dir {args.video_dir}: no video for clip {missing[0][0]} ({missing[0][1]}-{missing[0][2]} s): "
            f"looked for {expected_names(*missing[0])}; {len(missing)} of {len(keys)} clips have none. Pass "
            "--skip_missing_videos to predict the others (the skipped clips get an empty answer)"
        )
    unusable, frame_counts = [], []
    # Under `accelerate launch` every process checks every video; the first of each machine shows the bar.
    quiet = os.environ.get("LOCAL_RANK", "0") != "0"
    for key, video in zip(keys, tqdm(videos, desc="Checking the clips' videos", unit="video", disable=quiet)):
        try:
            frame_counts.append(None if video is None else sampling.count(check_video(video, sampling)))
        except DataError as error:
            unusable.append((key, error))
    if unusable:
        (video_id, start, end), error = unusable[0]
        raise DataError(
            f"{error} (the video of clip {video_id}, {start}-{end} s); {len(unusable)} of {len(keys)} clips' videos "
            "cannot be used"
        )
    if missing:
        logger.warning(
            "%d of %d clips have no video in %s: skipped, with an empty answer", len(missing), len(keys), args.video_dir
        )
    return videos, frame_counts


def noun_phrase_pipeline(args, num_beams: int):
    """The spaCy pipeline that picks the first noun-phrase beam, or None when there is no choice to make."""
    if not (args.only_noun_phrases and num_beams > 1):
        return None
    from fiberbench.modeling.noun_phrases import load_spacy_pipeline

    return load_spacy_pipeline(args.spacy_model)


def reader_pipeline(args, kind: str):
    """The spaCy pipeline of the answer reader's noun-phrase step, or None: for models that answer in the paper's
    format, and with --no_read_noun_phrases.

    Where none can be loaded, a UsageError says so (never a silent reading without the step,
    which gives other answers): install one, or pass --no_read_noun_phrases.
    """
    if kind not in PROMPTED_KINDS or args.read_noun_phrases is False:
        return None
    return load_reader_pipeline(args.spacy_model)


def noun_phrase_settings(nlp) -> dict:
    """The decoding settings of the noun-phrase beam choice (`nlp` None: the first beam)."""
    from fiberbench.modeling.noun_phrases import pipeline_name

    return {"only_noun_phrases": nlp is not None, "spacy_model": None if nlp is None else pipeline_name(nlp)}


def read_replies(replies: "list[list[str]]", masked_captions: list[str], nlp) -> list[list[str]]:
    """Each clip's answers read from its replies (one per beam, in beam order) by the answer reader."""
    answers = iter(
        read_answers(
            [reply for replied in replies for reply in replied],
            [caption for caption, replied in zip(masked_captions, replies) for _ in replied],
            nlp,
        )
    )
    return [[next(answers) for _ in replied] for replied in replies]


def answer_fields(
    masked_captions: list[str], candidates: "list[list[str]]", nlp, replies: "list[list[str]] | None" = None
) -> list[dict]:
    """Each clip's `prediction` and `candidates` in a predictions file, and its replies as `raw` when they are given.

    The answer and the candidates are as training records them (`fiberbench.answers`): the
    distinct answers after the metric's normalization, and with `nlp` the first of them that is a
    noun phrase in the blank (the paper's choice), else the first.
    """
    from fiberbench.answers import answers_and_candidates

    answers, distinct = answers_and_candidates(masked_captions, candidates, nlp)
    fields = [{"prediction": answer, "candidates": ranked} for answer, ranked in zip(answers, distinct)]
    if replies is not None:
        fields = [field | {"raw": replied} for field, replied in zip(fields, replies)]
    return fields


def local_or_hub(name: str | None) -> str | None:
    """A local folder as its absolute path (the same however it was spelled), a Hub id as it is."""
    if name is None or not Path(name).expanduser().exists():
        return name
    return str(Path(name).expanduser().resolve())


@dataclass
class Run:
    """What a run works on, once every check that could refuse it has passed: what `describe_run` records
    and `predict_shard` reads."""

    args: argparse.Namespace
    config: "PretrainedConfig"
    kind: str
    predictor: "Predictor"
    split: "datasets.Dataset"
    keys: "list[ClipKey]"  # each row's clip, in dataset order
    videos: "list[ClipVideo | None] | None"  # video-language models: each row's video (None: missing, skipped)
    nlp: "Language | None"  # the pipeline that picks the first noun-phrase beam, if any
    reader_nlp: "Language | None"  # the pipeline of the answer reader's noun-phrase step, if any
    dtype: "torch.dtype"
    model_files: dict[str, str] | None  # a local model folder's files (`model_files`); None for a Hub model


def dataset_fingerprint(split, reads_features: bool) -> str:
    """The fingerprint of what a model reads of each row (`split_fingerprint`): a rebuilt dataset with other captions
    or features is other data, for a resumed run and for --reread alike."""
    from fiberbench.data.loading import split_fingerprint

    from fiberbench.predictions import KEY_FIELDS

    return split_fingerprint(split, [*KEY_FIELDS, "masked_caption", *(["video_features"] if reads_features else [])])


def describe_run(prepared: Run) -> dict:
    """The settings the predictions depend on, recorded beside them: a rerun resumes only with the same."""
    import fiberbench
    from fiberbench.data.provenance import is_synthetic

    args = prepared.args
    return {
        "fiberbench_version": fiberbench.__version__,
        "model": {
            "name_or_path": local_or_hub(args.model_name_or_path),
            "revision": args.revision,
            "commit": model_commit(args),
            "kind": prepared.kind,
            "architectures": prepared.config.architectures,
            "dtype": str(prepared.dtype).removeprefix("torch."),
            # A local folder's files (a Hub model's are its commit's): re-saved weights are other settings.
            "files": prepared.model_files,
        },
        "dataset": {
            "name": local_or_hub(args.dataset_name),
            "config": prepared.predictor.dataset_config,
            "split": args.split,
            "clips": len(prepared.split),
            "synthetic": is_synthetic(args.dataset_name),
            "fingerprint": dataset_fingerprint(prepared.split, prepared.predictor.reads_features),
        },
        "prompt": prepared.predictor.prompt(prepared.split[0]["masked_caption"]),
        "decoding": prepared.predictor.decoding() | noun_phrase_settings(prepared.nlp),
        "reader": reader_settings(prepared.reader_nlp) if prepared.kind in PROMPTED_KINDS else None,
        "video": prepared.predictor.video_settings() if prepared.kind == "video" else None,
    }


def run(args) -> int:
    from fiberbench.errors import alike_on_every_process

    if args.reread is not None:
        from .reread import reread

        return reread(args)
    # Every process makes these checks alike: a refusal is said once, by the main process.
    with alike_on_every_process():
        check_flags(args)
        files = model_files(args)  # hashed once: a large model's files take a while
        request = request_of(args, files)
        if answered_by_the_record(args, files, request):
            return 0
        prepared, predictions, inputs, accelerator = prepare_run(args, files, request)

    def load_model() -> None:
        # Loaded before anything is written: weights that do not match the config are refused with nothing written.
        prepared.predictor.load_model(accelerator.device, prepared.dtype)

    # Locked by the main process until the rows are merged.
    with predictions.open(inputs, accelerator, under_the_lock=load_model):
        predict_and_merge(prepared, predictions, accelerator)
    return 0


def run_inputs(args) -> list:
    """What the output is kept apart from: the local model and dataset folders, and the videos' folder."""
    local_inputs = [path for path in (args.model_name_or_path, args.dataset_name) if path and Path(path).exists()]
    return [*local_inputs, args.video_dir]


# Arguments that change how a run goes, not what it predicts.
NOT_IN_REQUEST = ("output_file", "overwrite_output_file", "per_device_eval_batch_size", "reread")


def request_of(args, files: dict[str, str] | None) -> dict | None:
    """What a run asks for, as the record keeps it beside the settings: the arguments that decide the predictions
    and the files of the local model (`files`, `model_files`) and dataset folders (read, not loaded). None for a Hub
    model or dataset, whose files are known only once they are resolved."""
    from fiberbench.data import SAMPLE_DIR
    from fiberbench.files import folder_fingerprint
    from fiberbench.ownership import arguments_of

    dataset = SAMPLE_DIR if args.dataset_name is None else Path(args.dataset_name).expanduser()
    if files is None or not dataset.is_dir():
        return None
    arguments = {name: value for name, value in arguments_of(args)["arguments"].items() if name not in NOT_IN_REQUEST}
    arguments |= {name: local_or_hub(getattr(args, name)) for name in ("model_name_or_path", "dataset_name")}
    # The pipeline chosen by default is named by the environment (see --spacy_model).
    environment = {"FIBERBENCH_SPACY_MODEL": os.environ.get("FIBERBENCH_SPACY_MODEL")}
    return {
        "arguments": arguments,
        "environment": environment,
        "model_files": files,
        "dataset_files": folder_fingerprint(dataset),
    }


def known_settings(args, files: dict[str, str] | None) -> dict:
    """The settings (`describe_run`) that the arguments decide alone, known before any model or pipeline is read."""
    import fiberbench

    return {
        "fiberbench_version": fiberbench.__version__,
        "model": {
            "name_or_path": local_or_hub(args.model_name_or_path),
            "revision": args.revision,
            "files": files,
        },
        "dataset": {"name": local_or_hub(args.dataset_name), "split": args.split},
        "decoding": {"max_new_tokens": args.max_new_tokens}
        | ({"num_beams": args.num_beams} if args.num_beams is not None else {}),
    }


def answered_by_the_record(args, files: dict[str, str] | None, request: dict | None) -> bool:
    """Before anything is loaded: an earlier output's recorded settings that differ from what the arguments decide
    are refused, and a complete output asked for with this `request` is said to be done (True: nothing to do)."""
    from .outputs import PredictionsFile

    predictions = PredictionsFile(args.output_file, known_settings(args, files), overwrite=args.overwrite_output_file)
    if not predictions.answered_by_the_record(run_inputs(args), request):
        return False
    logger.info("%s is complete, made with these settings: nothing to do", args.output_file)
    return True


def prepare_run(args, files: dict[str, str] | None, request: dict | None) -> tuple:
    """Every check that could refuse the run, then what it works on: the `Run`, its `PredictionsFile`, its inputs and
    the Accelerator."""
    from .outputs import PredictionsFile

    config = load_config(args)
    kind = choose_kind(args, config)
    check_max_new_tokens(args, config)
    if kind in PROMPTED_KINDS and args.prompt is None:
        args.prompt = DEFAULT_PROMPT
    inputs = run_inputs(args)
    # Before anything is loaded: an output that is not this command's to write (its settings are compared later).
    PredictionsFile(args.output_file, {}, overwrite=args.overwrite_output_file).output.check(inputs, resume=True)
    predictor = make_predictor(args, kind, config)
    split = load_split(args, predictor.dataset_config)
    described = f"{args.dataset_name or 'the bundled sample'}, split {args.split}"
    keys = clip_keys(split, described)
    if not keys:
        raise DataError(f"{described}: has no clips")
    videos, frame_counts = find_videos(args, keys, predictor.sampling) if kind == "video" else (None, None)
    if kind in PROMPTED_KINDS:
        predictor.render_texts(list(split["masked_caption"]), frame_counts)

    nlp = noun_phrase_pipeline(args, predictor.num_beams)
    reader_nlp = reader_pipeline(args, kind)
    # Imported here, not first: a mistyped path or flag above is answered before they take seconds to load.
    import torch
    from accelerate import Accelerator

    accelerator = Accelerator()  # under `accelerate launch`, its processes (with ACCELERATE_USE_CPU=1, on CPU)
    on_bf16_gpu = accelerator.device.type == "cuda" and torch.cuda.is_bf16_supported()
    dtype = torch.bfloat16 if on_bf16_gpu else torch.float32
    prepared = Run(
        args=args,
        config=config,
        kind=kind,
        predictor=predictor,
        split=split,
        keys=keys,
        videos=videos,
        nlp=nlp,
        reader_nlp=reader_nlp,
        dtype=dtype,
        model_files=files,
    )
    predictions = PredictionsFile(
        args.output_file, describe_run(prepared), overwrite=args.overwrite_output_file, request=request
    )
    return prepared, predictions, inputs, accelerator


def predict_and_merge(prepared: Run, predictions, accelerator) -> None:
    """With the output opened (checked, locked, its part files started or resumed): predict the clips not done, merge
    them."""
    args, keys, predictor, settings = prepared.args, prepared.keys, prepared.predictor, predictions.settings
    described = f"{args.dataset_name or 'the bundled sample'}, split {args.split}"
    done = predictions.done()
    accelerator.wait_for_everyone()  # every process has read the part files before any writes a new one
    pending = [index for index, key in enumerate(keys) if key not in done]
    if accelerator.is_main_process:
        logger.info(
            "%s: %d of %d clips of %s already predicted, %d to go%s",
            args.output_file,
            len(done & set(keys)),
            len(keys),
            described,
            len(pending),
            " (SYNTHETIC data)" if settings["dataset"]["synthetic"] else "",
        )
    shard = pending[accelerator.process_index :: accelerator.num_processes]
    logger.info(
        "Process %d of %d: %d clips to predict", accelerator.process_index + 1, accelerator.num_processes, len(shard)
    )
    if shard:
        predict_shard(prepared, shard, predictions, accelerator)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        output = predictions.merge(keys, predictor.num_beams)
        skipped = len(output["skipped_missing_videos"])
        logger.info(
            "Wrote %d predictions to %s (settings in %s)%s",
            output["rows"],
            args.output_file,
            predictions.metadata_path.name,
            f"; {skipped} clips skipped for a missing video" if skipped else "",
        )


def predict_shard(prepared: Run, shard: list[int], predictions, accelerator) -> None:
    """Predict this process's clips (`shard`, row indices) batch by batch, writing each batch's rows as a part file.

    The batches' inputs are made ahead by data loader workers (`loading`) while the model generates.
    """
    from tqdm.auto import tqdm


    from .loading import make_loader
    from fiberbench.predictions import KEY_FIELDS

    from .outputs import SKIPPED

    args, predictor = prepared.args, prepared.predictor
    processes_here = int(os.environ.get("LOCAL_WORLD_SIZE", accelerator.num_processes))
    workers = args.dataloader_num_workers
    if workers is None:
        workers = default_num_workers(processes_here)
    loader = make_loader(
        predictor,
        shard,
        batch_size=args.per_device_eval_batch_size,
        split=prepared.split,
        videos=prepared.videos,
        num_workers=workers,
        pin_memory=accelerator.device.type == "cuda",
    )
    logger.info(
        "Process %d of %d: the inputs made %s",
        accelerator.process_index + 1,
        accelerator.num_processes,
        f"by {loader.num_workers} data loader workers" if loader.num_workers else "in this process",
    )
    prompted = prepared.kind in PROMPTED_KINDS
    progress = tqdm(
        total=len(shard),
        unit="clip",
        desc=f"Predicting (process {accelerator.process_index + 1} of {accelerator.num_processes})",
        disable=not accelerator.is_local_main_process,
    )
    with progress:
        for batch in loader:
            if batch.error is not None:  # a clip that failed to decode in a worker: its one line
                raise DataError(batch.error)
            # Clips without a video (--skip_missing_videos) are not put to the model.
            indices, present, masked_captions = batch.indices, batch.present, batch.masked_captions
            if prompted:  # models that reply in words: their replies are read, and kept
                replies = predictor.replies(batch.inputs) if present else []
                candidates = read_replies(replies, masked_captions, prepared.reader_nlp)
                answered = answer_fields(masked_captions, candidates, prepared.nlp, replies)
            else:
                candidates = predictor.candidates(batch.inputs) if present else []
                answered = answer_fields(masked_captions, candidates, prepared.nlp)
            predicted = dict(zip(present, answered))
            skipped = {"prediction": "", "candidates": [], SKIPPED: True} | ({"raw": []} if prompted else {})
            records = [dict(zip(KEY_FIELDS, prepared.keys[index])) | predicted.get(index, skipped) for index in indices]
            predictions.append(accelerator.process_index, records)
            progress.update(len(indices))
