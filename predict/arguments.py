"""`fiberbench predict`'s flags (`add_arguments`), as argparse declares them.

A value that can be judged alone is checked as it is parsed (an argparse `type`: a count, the
--prompt template, the output's format), in one line naming the flag. What the flags become is
`settings.PredictSettings`, read once from the parsed command line and checked there against each
other and this machine (`PredictSettings.check_flags`); the checks that need the model's config
(which kind it is, which flags that kind reads) are in `kinds`.
"""

import argparse
from pathlib import Path

from fiberbench.cli import add_video_dir_argument, non_negative_int, positive_float, positive_int
from fiberbench.models import add_model_arguments
from fiberbench.predict.prompts import DEFAULT_PROMPT, check_template

from fiberbench.predict.kinds import KIND_NAMES
from fiberbench.predict.settings import PredictSettings
from fiberbench.predict.video import DEFAULT_NUM_FRAMES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "The kind of model is read from its config: FIBER models (I3D features, the paper's decoding), seq2seq LMs "
        "(the paper's zero-shot format), causal LMs (--prompt, through the chat template when there is one) and "
        "video-language models (AutoModelForImageTextToText: frames of each clip's video in --video_dir, as a video "
        "when the processor has a video processor, else as images; then --prompt). The answer in a causal or "
        "video-language model's reply is read as a person would: the filled-in caption, 'the answer is X', a quoted "
        "or bold phrase, else the first sentence (fiberbench.predict.replies); the replies are kept, and --reread "
        "reads them again. "
        "Data-parallel: accelerate launch --multi_gpu --num_processes N -m fiberbench.cli predict ... "
        f"The default --prompt: {DEFAULT_PROMPT!r}"
    )
    model = parser.add_argument_group("model")
    add_model_arguments(model, required=False, remote_code_needed_by="FIBER")
    model.add_argument(
        "--model_type", choices=list(KIND_NAMES), default=None, help="Override the kind read from the config."
    )
    model.add_argument(
        "--device_map",
        default=None,
        help="Spread the model over this machine's GPUs (auto, balanced, sequential; Accelerate places the layers): "
        "for a model too big for one GPU, in one process. For many clips at once on many GPUs, accelerate launch.",
    )
    data = parser.add_argument_group("data")
    data.add_argument(
        "--dataset_name",
        default=None,
        help="A FIBER dataset folder or Hub id; the bundled SYNTHETIC sample if omitted.",
    )
    data.add_argument("--split", default="test", help="The split to predict (default: test).")
    data.add_argument("--max_predict_samples", type=positive_int, default=None, help="Predict only the first N clips.")
    add_video_dir_argument(data, "Video-language models: the clips' videos")
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
        "--prompt",
        type=prompt_template,
        default=None,
        help="Causal and video-language models: a template holding {masked_caption}.",
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


def parse_settings(flags: list) -> PredictSettings:
    """The settings of `fiberbench predict FLAGS...` (an empty list: every default), for `--reread`'s check of the
    flags given and for the tests and benchmarks that drive a predictor directly."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return PredictSettings.from_args(parser.parse_args([str(flag) for flag in flags]))


def prompt_template(text: str) -> str:
    """argparse type of --prompt: a template that `fiberbench.predict.prompts.check_template` accepts."""
    try:
        return check_template(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def jsonl_file(text: str) -> Path:
    """argparse type of --output_file: a `.jsonl` file, the format written (and the one `evaluate` reads as such)."""
    if Path(text).suffix != ".jsonl":
        raise argparse.ArgumentTypeError(f"predictions are JSON Lines: name a .jsonl file, got {text!r}")
    return Path(text)
