"""`fiberbench predict`'s flags (`add_arguments`), and the checks that need neither torch nor the data (`check`): the
CLI runs them before the command's module loads torch and transformers, so that a mistyped folder or an unreachable
Hub is one line in a second, and `fiberbench predict --help` is quick."""

import argparse
import os
from pathlib import Path

from fiberbench.cli import add_video_dir_argument, non_negative_int, positive_float, positive_int
from fiberbench.errors import DataError, UsageError
from fiberbench.models import add_model_arguments, locate_model
from fiberbench.predict.prompts import DEFAULT_PROMPT, check_template

# The kinds of model, read from the config (`fiberbench.predict.predictors.KINDS`: each one's class) or --model_type.
MODEL_TYPES = ("fiber", "video", "seq2seq", "causal")
DEFAULT_NUM_FRAMES = 8  # when neither the flags nor the video processor choose them
# --device_map's ways to spread a model (Accelerate's); any other value names one device.
DEVICE_MAP_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")
# The flags of the video's frames, which a blind run (--video_input none) does not read.
BLIND_IGNORES = ("video_dir", "num_frames", "fps", "max_frames", "skip_missing_videos")
# The flags --reread reads; every other one belongs to generation, which --reread does not do.
REREAD_FLAGS = ("reread", "output_file", "overwrite_output_file", "read_noun_phrases", "only_noun_phrases",
                "spacy_model")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "The kind of model is read from its config: FIBER models (their video features, the paper's decoding), "
        "seq2seq LMs (the paper's zero-shot format), causal LMs (--prompt, through the chat template when there is "
        "one) and video-language models (AutoModelForImageTextToText: frames of each clip's video in --video_dir, as a "
        "video when the processor has a video processor, else as images; then --prompt). A reply's answer is read as "
        "a person would (fiberbench.predict.replies); the replies are kept, and --reread reads them again. Rerun the "
        "same command to resume. Data-parallel: accelerate launch --multi_gpu --num_processes N -m fiberbench.cli "
        f"predict ... The default --prompt: {DEFAULT_PROMPT!r}"
    )
    model = parser.add_argument_group("model")
    add_model_arguments(model, required=False, remote_code_needed_by="FIBER")
    model.add_argument("--model_type", choices=MODEL_TYPES, help="Override the kind read from the config.")
    model.add_argument("--device_map", help="Spread the model over this machine's GPUs (auto, balanced, sequential) in "
                       "one process, for a model too big for one GPU (for speed on many GPUs: accelerate launch).")
    data = parser.add_argument_group("data")
    data.add_argument("--dataset_name", help="A FIBER dataset folder or Hub id (default: the SYNTHETIC sample).")
    data.add_argument("--split", default="test", help="The split to predict (default: test).")
    data.add_argument("--max_predict_samples", type=positive_int, help="Predict only the first N clips.")
    add_video_dir_argument(data, "Video-language models: the clips' videos")
    data.add_argument("--video_input", choices=("auto", "video", "images", "none"), help="Video-language models: the "
                      "frames as a video (with their times) or as images (default auto: a video when the processor has "
                      "a video processor). none, any model: a blind control, the same weights, prompt and decoding "
                      "without the video (a FIBER model's features withheld; a text model is blind already).")
    data.add_argument("--num_frames", type=positive_int, help="Frames per clip, at the centres of equal parts of it "
                      f"(default: the video processor's own sampling, else {DEFAULT_NUM_FRAMES}).")
    data.add_argument("--fps", type=positive_float, help="Instead of --num_frames: frames per second of clip.")
    data.add_argument("--max_frames", type=positive_int, help="With --fps: frames per clip at most.")
    data.add_argument("--skip_missing_videos", action="store_true", help="An empty answer for a clip without a video "
                      "(listed in the metadata; a rerun predicts it once its video is there).")
    decoding = parser.add_argument_group("decoding")
    decoding.add_argument("--prompt", type=prompt_template,
                          help="Causal and video-language models: a template holding {masked_caption}.")
    decoding.add_argument("--num_beams", type=positive_int,
                          help="Beams (default: the paper's for FIBER and seq2seq LMs, else 1).")
    decoding.add_argument("--max_new_tokens", type=positive_int, default=10, help="Tokens generated at most (10).")
    # Spelled as HfArgumentParser spells a boolean that is on by default: --X, and --no_X to turn it off.
    decoding.add_argument("--only_noun_phrases", action="store_true", default=True, help="With several beams, answer "
                          "with the first that is a noun phrase in the blank (default, as the paper).")
    decoding.add_argument("--no_only_noun_phrases", dest="only_noun_phrases", action="store_false",
                          help="Answer with the first beam.")
    decoding.add_argument("--read_noun_phrases", action="store_true", default=None, help="Replies: when the answer "
                          "read is not a noun phrase in the blank, the first noun phrase in it that is (default: on; "
                          "it needs an English spaCy pipeline, and without one the run is refused).")
    decoding.add_argument("--no_read_noun_phrases", dest="read_noun_phrases", action="store_false",
                          help="Answer with what the reader reads in the reply (recorded in the metadata).")
    decoding.add_argument("--spacy_model", help="spaCy pipeline of the noun-phrase checks (default: "
                          "$FIBERBENCH_SPACY_MODEL, else en_core_web_trf, else the largest English one here).")
    decoding.add_argument("--per_device_eval_batch_size", type=positive_int, default=16,
                          help="Clips per generate call and process (16).")
    decoding.add_argument("--dataloader_num_workers", type=non_negative_int, help="Processes making the next batches' "
                          "inputs while the model generates (default: a process's share of the cores, less one); the "
                          "predictions are the same with any number.")
    output = parser.add_argument_group("output")
    output.add_argument("--output_file", type=jsonl_file, default=Path("predictions.jsonl"), help="The predictions "
                        "(a .jsonl file); their settings in NAME.metadata.json beside it. Rerun to resume.")
    output.add_argument("--overwrite_output_file", action="store_true", help="Replace an output of other settings.")
    output.add_argument("--reread", type=Path, metavar="PREDICTIONS_FILE", help="Instead of running a model: read the "
                        "replies kept in these predictions again (with --read_noun_phrases, --spacy_model, "
                        "--only_noun_phrases as given) into --output_file.")


def prompt_template(text: str) -> str:
    """argparse type of --prompt: a template that `check_template` accepts."""
    try:
        return check_template(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def jsonl_file(text: str) -> Path:
    """argparse type of --output_file: a `.jsonl` file, the format written."""
    if Path(text).suffix != ".jsonl":
        raise argparse.ArgumentTypeError(f"predictions are JSON Lines: name a .jsonl file, got {text!r}")
    return Path(text)


def check(args: argparse.Namespace) -> argparse.Namespace:
    """The flags their parsing cannot judge alone (one missing, two that exclude each other, a folder this machine
    does not have, a file to --reread that is not there), then the model's folder or Hub id: a `UsageError` or
    `DataError` naming the flag. Returns the arguments with the located model (`model_source`, by `locate_model`)."""
    if args.reread is not None:
        defaults = vars(parser_of().parse_args([]))
        given = [name for name, value in vars(args).items() if name in defaults and name not in REREAD_FLAGS
                 and value != defaults[name]]
        if given:
            raise UsageError(f"--{given[0]} does not apply to --reread, which reads the replies kept in {args.reread} "
                             "again with the model, data and prompt recorded in its metadata")
        if not args.reread.is_file():
            raise DataError(f"--reread {args.reread}: no such file")
        return args
    if args.model_name_or_path is None:
        raise UsageError("--model_name_or_path is required (or --reread, to read a predictions file's replies again)")
    if args.num_frames is not None and args.fps is not None:
        raise UsageError("--num_frames and --fps are two ways to choose the frames: give one")
    if args.video_input == "none" and (given := next((flag for flag in BLIND_IGNORES if getattr(args, flag)), None)):
        raise UsageError(f"--{given} does not apply to --video_input none, which runs the model without the video")
    if args.max_frames is not None and args.fps is None:
        raise UsageError("--max_frames applies to --fps (with --num_frames, the number of frames is fixed)")
    if args.video_dir is not None and args.video_dir.exists() and not args.video_dir.is_dir():
        raise UsageError(f"--video_dir {args.video_dir} is a file; give the folder of the clips' videos")
    if args.video_dir is not None and not args.video_dir.is_dir():
        raise DataError(f"--video_dir {args.video_dir}: no such folder")
    if args.device_map is not None and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise UsageError("--device_map spreads one model over the GPUs in one process; under accelerate launch each "
                         "process holds a copy of the model: use one or the other")
    source = locate_model(args.model_name_or_path, args.revision, args.trust_remote_code)
    return argparse.Namespace(**vars(args), model_source=source)


def parser_of() -> argparse.ArgumentParser:
    """`fiberbench predict`'s parser, alone: the defaults of its flags."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser
