"""The kinds of model `fiberbench predict` runs, told apart by their config, and how each kind answers a batch of clips.

- `fiber` (`FiberT5ForConditionalGeneration`): the paper's format plus the clip's video features (the
  dataset config its `video_features_name` names: `i3d`, or an encoder's), answered by `fill_blanks`' beams.
- `seq2seq` (`AutoModelForSeq2SeqLM`): the paper's zero-shot format, the blank as T5's
  `<extra_id_0>`; the answer is the text between `<extra_id_0>` and `<extra_id_1>`.
- `causal` (`AutoModelForCausalLM`): a prompt template (`{masked_caption}`), through the chat
  template when the tokenizer has one; it replies in words.
- `video` (`AutoModelForImageTextToText` + `AutoProcessor`): frames sampled from the clip's video,
  then the prompt; it replies in words. The frames go in as a video when the processor has a video
  processor (`videos=`, the chat template's video part, the frames' times as video metadata), else
  as images through its image processor (`--video_input`).

A batch is answered in two steps: `inputs` makes what the model reads from the batch's rows on the
CPU, without the model (the captions tokenized, a clip's frames decoded and processed), which
`fiberbench predict` does in its data loader's worker processes (`loading`); then the paper-format
predictors give, for each clip, its ranked, distinct candidate answers (one per beam,
`candidates`), the prompted ones each clip's replies (one per beam, `replies`), which `fiberbench
predict` reads with the answer reader (`replies.read_answers`). Then it picks the answer.
"""

from typing import TYPE_CHECKING

import numpy as np
import torch

from fiberbench.videos import ClipFrames, FrameSampling, sample_frames

if TYPE_CHECKING:
    from transformers import BatchFeature

# The Auto class of each kind other than FIBER, in the order a config is matched against them: some
# configs (Gemma 3, Mllama, ...) are both image-text-to-text and causal LM; the richer kind wins.
AUTO_CLASSES = {
    "video": "AutoModelForImageTextToText",
    "seq2seq": "AutoModelForSeq2SeqLM",
    "causal": "AutoModelForCausalLM",
}
# transformers' mapping (config class -> model class) behind each Auto class, models registered by packages included.
AUTO_MAPPINGS = {
    "video": "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING",
    "seq2seq": "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING",
    "causal": "MODEL_FOR_CAUSAL_LM_MAPPING",
}
# FIBER models, and T5 checkpoints run as text-only ones (--model_type fiber).
FIBER_MODEL_TYPES = ("fiber_t5", "t5")


def model_class(kind: str) -> str:
    """The class that loads a model of `kind`, as messages name it."""
    return "FiberT5ForConditionalGeneration" if kind == "fiber" else AUTO_CLASSES[kind]


def loads_as(kind: str, config) -> bool:
    """Whether `model_class(kind)` loads the model of `config`: by its config class, or remote code's `auto_map`."""
    import transformers

    if kind == "fiber":
        return config.model_type in FIBER_MODEL_TYPES
    auto_map = getattr(config, "auto_map", None) or {}
    return type(config) in getattr(transformers, AUTO_MAPPINGS[kind]) or AUTO_CLASSES[kind] in auto_map


def detect_kind(config) -> str | None:
    """The kind of model `config` describes, or None when fiberbench predict runs no such model."""
    from fiberbench.modeling import FiberT5Config

    if isinstance(config, FiberT5Config):
        return "fiber"
    return next((kind for kind in AUTO_CLASSES if loads_as(kind, config)), None)


class Predictor:
    """One kind of model: its settings (recorded with the predictions) before loading, then its answers.

    `load_model` is separate from the constructor so that everything that could refuse the run
    (the tokenizer, the prompt, an existing output with other settings) is checked before the
    weights are read.
    """

    kind: str
    dataset_config = "text"
    reads_features = False  # each row has the clip's I3D `video_features`
    reads_video = False  # each row has the clip's `video` (a `ClipVideo`)

    def __init__(self, args, loading: dict, config):
        self.args = args
        self.loading = loading  # from_pretrained's keyword arguments: revision, trust_remote_code
        self.num_beams = args.num_beams or 1
        self.model = None

    def __getstate__(self) -> dict:
        # A predictor is copied to data loader workers (pickled where they are spawned) to make inputs: not its model.
        return self.__dict__ | {"model": None}

    def decoding(self) -> dict:
        """The generation settings, exactly as `generate` gets them."""
        return {"num_beams": self.num_beams, "max_new_tokens": self.args.max_new_tokens, "do_sample": False}

    def prompt(self, masked_caption: str) -> dict:
        """How a caption is put to the model, with the exact input of `masked_caption`."""
        raise NotImplementedError

    def load_model(self, device: torch.device, dtype: torch.dtype) -> None:
        raise NotImplementedError

    def inputs(self, rows: list[dict]):
        """What the model reads for a batch of rows, each with `masked_caption` (and what the kind reads), made on the
        CPU without the model: `fiberbench predict` makes them in data loader workers (`loading`)."""
        raise NotImplementedError

    def candidates(self, inputs) -> list[list[str]]:
        """Each row's ranked, distinct answers, from the batch's `inputs`.

        Paper-format kinds only; models that reply in words (`PromptedPredictor`) give `replies`.
        """
        raise NotImplementedError

    def _from_pretrained(self, auto_class, device, dtype):
        """The model from its safetensors weights (never a pickle, which can run code), in eval mode: on `device`, or
        spread over the machine's devices by Accelerate with --device_map."""
        from fiberbench.errors import DataError
        from fiberbench.modeling.modeling_fiber_t5 import weights_mismatch

        name = self.args.model_name_or_path
        placement = {"device_map": self.args.device_map} if self.args.device_map else {}
        try:
            model, loading_info = auto_class.from_pretrained(
                name, dtype=dtype, use_safetensors=True, output_loading_info=True, **placement, **self.loading
            )
        except (OSError, ValueError, RuntimeError) as error:
            raise DataError(
                f"--model_name_or_path {name}: cannot be loaded as --model_type {self.kind} ({error})"
            ) from error
        mismatch = weights_mismatch(loading_info)
        if mismatch:
            raise DataError(
                f"--model_name_or_path {name}: its weights do not match its config ({mismatch}); it would run with "
                "random or missing weights"
            )
        return (model if placement else model.to(device)).eval()


class PaperFormatPredictor(Predictor):
    """Models that answer in the paper's format (T5's sentinels) and decode as the paper: FIBER and seq2seq LMs."""

    processor = None  # a FiberProcessor: the blank as <extra_id_0>, the answer read between the sentinels

    def decoding(self) -> dict:
        from fiberbench.modeling.decoding import PAPER_DECODING

        return {"num_beams": self.num_beams, **PAPER_DECODING, "max_new_tokens": self.args.max_new_tokens}

    def prompt(self, masked_caption: str) -> dict:
        return {
            "format": "the paper's: the blank as <extra_id_0>, the answer between <extra_id_0> and <extra_id_1>",
            "video": None,
            "example": self.processor.tokenizer.decode(self.processor(masked_caption).input_ids[0]),
        }


class FiberPredictor(PaperFormatPredictor):
    """This project's models: the paper's decoding through `fill_blanks`, with the video features they were trained on
    unless text-only."""

    kind = "fiber"

    def __init__(self, args, loading: dict, config):
        super().__init__(args, loading, config)
        from transformers import AutoProcessor, AutoTokenizer

        from fiberbench.modeling import FiberProcessor
        from fiberbench.modeling.decoding import PAPER_NUM_BEAMS

        # A T5 checkpoint run as a FIBER model (--model_type fiber) is a text-only one.
        self.fusion = getattr(config, "fusion", "none")
        self.features_name = getattr(config, "video_features_name", "i3d")
        self.dataset_config = "text" if self.fusion == "none" else self.features_name
        self.reads_features = self.fusion != "none"
        self.num_beams = args.num_beams or PAPER_NUM_BEAMS[self.fusion]
        try:
            processor = AutoProcessor.from_pretrained(args.model_name_or_path, **loading)
        except (OSError, ValueError):
            processor = None
        if not isinstance(processor, FiberProcessor):  # saved without its processor: the tokenizer is enough
            processor = FiberProcessor(AutoTokenizer.from_pretrained(args.model_name_or_path, **loading))
        self.processor = processor

    def prompt(self, masked_caption: str) -> dict:
        video = f"the clip's {self.features_name} features ({self.fusion} fusion)" if self.reads_features else None
        return super().prompt(masked_caption) | {"video": video}

    def load_model(self, device, dtype):
        from fiberbench.modeling import FiberT5ForConditionalGeneration

        self.model = self._from_pretrained(FiberT5ForConditionalGeneration, device, dtype)
        # fill_blanks decodes with the generation config: the paper's settings, as recorded by `decoding`.
        self.model.generation_config.update(**{k: v for k, v in self.decoding().items() if k != "num_beams"})

    def inputs(self, rows):
        features = [row["video_features"] for row in rows] if self.reads_features else None
        return self.processor([row["masked_caption"] for row in rows], video_features=features)

    def candidates(self, inputs):
        return self.model.blank_candidates(self.processor, inputs, self.num_beams)


class Seq2SeqPredictor(PaperFormatPredictor):
    """Seq2seq LMs of the T5 family, zero-shot in the paper's format and with its decoding (8 beams)."""

    kind = "seq2seq"

    def __init__(self, args, loading: dict, config):
        super().__init__(args, loading, config)
        from transformers import AutoTokenizer

        from fiberbench.errors import UsageError
        from fiberbench.modeling import FiberProcessor
        from fiberbench.modeling.decoding import ZERO_SHOT_NUM_BEAMS

        self.num_beams = args.num_beams or ZERO_SHOT_NUM_BEAMS
        tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path, **loading)
        try:
            self.processor = FiberProcessor(tokenizer)
        except ValueError as error:
            raise UsageError(
                f"--model_name_or_path {args.model_name_or_path}: the paper's zero-shot format needs T5's sentinel "
                f"tokens ({error})"
            ) from error

    def load_model(self, device, dtype):
        from transformers import AutoModelForSeq2SeqLM

        self.model = self._from_pretrained(AutoModelForSeq2SeqLM, device, dtype)

    def inputs(self, rows):
        return self.processor([row["masked_caption"] for row in rows])

    def candidates(self, inputs):
        from fiberbench.modeling.decoding import generate_candidates

        with torch.inference_mode():
            return generate_candidates(self.model, self.processor, inputs, **self.decoding())


class PromptedPredictor(Predictor):
    """Models that read a prompt and reply in words (causal and video-language): their shared prompt and replies.

    The exact text of every caption is rendered once, up front (`render_texts`): a chat template
    from the model's folder is its author's code, run bounded in a child process (`chat_templates`).
    """

    chat_template: str | None
    # (masked caption, image parts) -> the exact text the model reads, from `render_texts`
    texts: dict[tuple[str, int | None], str]

    def _pad_on_the_left(self, tokenizer) -> None:
        # Every prompt of a batch then ends where generation starts.
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.tokenizer = tokenizer

    def text(self, masked_caption: str, image_parts: int | None = None) -> str:
        """The exact text the model reads for a caption (with `image_parts` image placeholders where the kind puts a
        clip's frames in as images), rendered here: see `render_texts`."""
        raise NotImplementedError

    def image_parts(self, num_frames: int | None) -> int | None:
        """How many image placeholders the text of a clip of `num_frames` frames holds (None: the text does not
        depend on the clip)."""
        return None

    def render_texts(self, masked_captions: list[str], frame_counts: list[int | None] | None = None) -> None:
        """Render the text of every caption of the run (each clip's, given its frame count), a chat template in a
        bounded child process (a `DataError` names what went wrong), and keep them for `rendered`.

        The first caption is also rendered as `prompt` describes it in the predictions' metadata.
        """
        from .chat_templates import render_bounded

        counts = frame_counts or [None] * len(masked_captions)
        prompts = [(masked_captions[0], self.image_parts(None))] if masked_captions else []
        prompts = list(dict.fromkeys([*prompts, *((c, self.image_parts(n)) for c, n in zip(masked_captions, counts))]))
        if self.chat_template is None:  # the --prompt template alone, which check_template checked
            self.texts = {arguments: self.text(*arguments) for arguments in prompts}
        else:
            self.texts = render_bounded(self.text, prompts, self.args.model_name_or_path)

    def rendered(self, masked_caption: str, num_frames: int | None = None) -> str:
        """The text of a caption (of a clip of `num_frames` frames), as `render_texts` rendered it."""
        return self.texts[masked_caption, self.image_parts(num_frames)]

    def prompt(self, masked_caption: str) -> dict:
        return {
            "template": self.args.prompt,
            "chat_template": self.chat_template,
            "example": self.rendered(masked_caption),
        }

    def replies(self, inputs) -> list[list[str]]:
        """Each row's replies as generated, one per beam, best first, from the batch's `inputs`."""
        raise NotImplementedError

    def _generate(self, inputs, decoder) -> list[list[str]]:
        """Generate from a batch of `inputs` on the model's device: each clip's replies (one per beam, best first),
        decoded by `decoder`."""
        with torch.inference_mode():
            sequences = self.model.generate(
                **inputs,
                num_return_sequences=self.num_beams,
                pad_token_id=self.tokenizer.pad_token_id,
                **self.decoding(),
            )
        replies = decoder.batch_decode(sequences[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
        return [replies[start : start + self.num_beams] for start in range(0, len(replies), self.num_beams)]


class CausalPredictor(PromptedPredictor):
    """Causal LMs: the prompt template, through the tokenizer's chat template when it has one."""

    kind = "causal"

    def __init__(self, args, loading: dict, config):
        super().__init__(args, loading, config)
        from transformers import AutoTokenizer

        self._pad_on_the_left(AutoTokenizer.from_pretrained(args.model_name_or_path, **loading))
        self.chat_template = self.tokenizer.chat_template

    def text(self, masked_caption, image_parts=None):
        prompt = self.args.prompt.format(masked_caption=masked_caption)
        if self.chat_template is None:
            return prompt
        return self.tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
        )

    def load_model(self, device, dtype):
        from transformers import AutoModelForCausalLM

        self.model = self._from_pretrained(AutoModelForCausalLM, device, dtype)

    def inputs(self, rows):
        # A chat template writes its own special tokens (BOS); a plain prompt gets the tokenizer's.
        return self.tokenizer(
            [self.rendered(row["masked_caption"]) for row in rows],
            padding=True,
            add_special_tokens=self.chat_template is None,
            return_tensors="pt",
        )

    def replies(self, inputs):
        # non_blocking: from a loader's pinned batch the copy to a GPU does not hold up this process.
        return self._generate(inputs.to(self.model.device, non_blocking=True), self.tokenizer)


# Where a video processor keeps its own frame sampling (`BaseVideoProcessor` and its subclasses).
SAMPLING_DEFAULTS = ("do_sample_frames", "fps", "num_frames", "min_frames", "max_frames")


def sampling_defaults(video_processor) -> dict:
    """The frame-sampling settings a video processor has, by name (none for a processor without one)."""
    values = {name: getattr(video_processor, name, None) for name in SAMPLING_DEFAULTS}
    return {name: value for name, value in values.items() if value is not None}


def frame_sampling(args, video_processor) -> tuple[FrameSampling, str]:
    """The frames each clip gives, and what chose them: --num_frames, else --fps (up to --max_frames), else the
    video processor's own default rate or number of frames, else `DEFAULT_NUM_FRAMES`."""
    from .command import DEFAULT_NUM_FRAMES

    if args.num_frames is not None:
        return FrameSampling(num_frames=args.num_frames), "--num_frames"
    if args.fps is not None:
        return FrameSampling(fps=args.fps, max_frames=args.max_frames), "--fps"
    defaults = sampling_defaults(video_processor)
    own = f"the defaults of {type(video_processor).__name__}"
    if "fps" in defaults:
        max_frames = defaults.get("max_frames", defaults.get("num_frames"))
        return FrameSampling(fps=defaults["fps"], max_frames=max_frames), own
    if "num_frames" in defaults:
        return FrameSampling(num_frames=defaults["num_frames"]), own
    return FrameSampling(num_frames=DEFAULT_NUM_FRAMES), f"fiberbench's default ({DEFAULT_NUM_FRAMES} frames)"


class VideoPredictor(PromptedPredictor):
    """Video-language models: frames of the clip's video, as a video or as images (`--video_input`), then the prompt.

    As a video, the frames go through the processor's video processor (`videos=`) with the clip's
    `video_metadata` and the chat template's `{"type": "video"}` part, so the family's own video
    placeholders (with the frames' times, for the families that write them) reach the model; the
    processor does not sample again (`do_sample_frames=False`). As images, each frame is one
    `{"type": "image"}` part through the image processor, as multi-image models read pictures.
    """

    kind = "video"
    reads_video = True

    def __init__(self, args, loading: dict, config):
        super().__init__(args, loading, config)
        from transformers import AutoProcessor

        from fiberbench.errors import UsageError

        name = args.model_name_or_path
        try:
            self.processor = AutoProcessor.from_pretrained(name, **loading)
        except ImportError as error:  # transformers' video processors need torchvision
            needs = " ".join(str(error).split()).split(". ")[0]  # its first sentence
            raise UsageError(
                f"--model_name_or_path {name}: its processor cannot be built here ({needs}); install torch and "
                'torchvision as a matching pair, then pip install -e ".[video]" (README: "Evaluate a video LLM")'
            ) from error
        self.chat_template = self.processor.chat_template
        video_processor = getattr(self.processor, "video_processor", None)
        described = f"--model_name_or_path {name}: its processor ({type(self.processor).__name__})"
        if args.video_input == "video" and video_processor is None:
            raise UsageError(f"--video_input video: {described} has no video processor; use --video_input images")
        self.video_input = args.video_input or "auto"
        if self.video_input == "auto":
            self.video_input = "images" if video_processor is None else "video"
        if self.video_input == "images" and getattr(self.processor, "image_processor", None) is None:
            raise UsageError(f"{described} has no image processor to read the clip's frames as images")
        placeholder = {"video": "video_token", "images": "image_token"}[self.video_input]
        if self.chat_template is None and getattr(self.processor, placeholder, None) is None:
            raise UsageError(
                f"{described} has neither a chat template nor a {placeholder.replace('_', ' ')}, so there is no "
                "known way to place the clip in the prompt"
            )
        self.processor_defaults = sampling_defaults(video_processor) if video_processor is not None else {}
        self.sampling, self.sampling_chosen_by = frame_sampling(args, video_processor)
        self._pad_on_the_left(self.processor.tokenizer)

    def render_texts(self, masked_captions, frame_counts=None):
        """As every prompted kind renders its texts; then a chat template that writes no placeholder for the clip's
        part is refused (the clip would not reach the model), naming the other --video_input."""
        from fiberbench.errors import UsageError

        self._check_fewest_frames(frame_counts)
        super().render_texts(masked_captions, frame_counts)
        placeholder = {"video": "video_token", "images": "image_token"}[self.video_input]
        token = getattr(self.processor, placeholder, None)
        if masked_captions and self.chat_template is not None and token is not None:
            if token not in self.rendered(masked_captions[0]):
                part, other = ("a video part", "images") if self.video_input == "video" else ("an image part", "video")
                raise UsageError(
                    f"--model_name_or_path {self.args.model_name_or_path}: its processor "
                    f"({type(self.processor).__name__}): its chat template writes no {token} for {part}, so the clip "
                    f"cannot be put in the prompt that way; try --video_input {other}"
                )

    def _check_fewest_frames(self, frame_counts: list[int | None] | None) -> None:
        """Put a blank clip of the fewest frames any clip gives through the video processor, before any work: a
        family that needs more (Qwen3-VL: its temporal patch, 2 frames) is refused here, not in the middle of the run.
        """
        from fiberbench.errors import UsageError

        counts = [count for count in frame_counts or [] if count is not None]
        if self.video_input != "video" or not counts:
            return
        fewest = min(counts)
        # 224 pixels a side: larger than every family's patch grid, so only the number of frames can be refused.
        blank = [np.zeros((224, 224, 3), dtype=np.uint8)] * fewest
        metadata = {"total_num_frames": fewest, "fps": 1.0, "duration": float(fewest), "width": 224, "height": 224}
        try:
            self.processor.video_processor(
                videos=[blank],
                video_metadata=[{**metadata, "frames_indices": list(range(fewest))}],
                do_sample_frames=False,
                return_tensors="pt",
            )
        except ValueError as error:
            processor = type(self.processor.video_processor).__name__
            raise UsageError(
                f"--model_name_or_path {self.args.model_name_or_path}: its video processor ({processor}) cannot read a "
                f"clip of {fewest} frame{'s' * (fewest != 1)} ({' '.join(str(error).split())}), and the frames chosen "
                f"by {self.sampling_chosen_by} give some clips that few: ask for more frames (--num_frames)"
            ) from error

    def video_settings(self) -> dict:
        """How the clips reach the model, as the predictions' metadata records it."""
        return {
            "input": self.video_input,
            "num_frames": self.sampling.num_frames,
            "fps": self.sampling.fps,
            "max_frames": self.sampling.max_frames,
            "frames": self.sampling.rule(),
            "chosen_by": self.sampling_chosen_by,
            "processor_defaults": self.processor_defaults,
            "video_metadata": (
                "fps, duration, total_num_frames and frames_indices of each clip, counted from its start"
                if self.video_input == "video"
                else None
            ),
        }

    def image_parts(self, num_frames):
        """One image part per frame on the images path (the sampling's number when the clip's is not known); the video
        path's text has one video part, whatever the frames."""
        if self.video_input == "video":
            return None
        return num_frames or self.sampling.num_frames or 1

    def text(self, masked_caption, image_parts=None):
        """The prompt with the clip's placeholder: one video part, or `image_parts` image parts (one per frame)."""
        prompt = self.args.prompt.format(masked_caption=masked_caption)
        if self.chat_template is None:
            if self.video_input == "video":
                return self.processor.video_token + prompt
            return self.processor.image_token * image_parts + prompt
        parts = [{"type": "video"}] if self.video_input == "video" else [{"type": "image"}] * image_parts
        return self.processor.apply_chat_template(
            [{"role": "user", "content": [*parts, {"type": "text", "text": prompt}]}],
            add_generation_prompt=True,
            tokenize=False,
        )

    def prompt(self, masked_caption):
        described = super().prompt(masked_caption)
        if self.video_input == "images" and self.sampling.num_frames is None:
            described["example_num_frames"] = 1  # with --fps each clip has its own number of image parts
        return described

    def load_model(self, device, dtype):
        from transformers import AutoModelForImageTextToText

        self.model = self._from_pretrained(AutoModelForImageTextToText, device, dtype)

    def _processed(self, rows: list[dict], clips: "list[ClipFrames]"):
        """The processor's output for rows (each with its `masked_caption`) and their clips' frames."""
        texts = [self.rendered(row["masked_caption"], len(clip.frames)) for row, clip in zip(rows, clips)]
        if self.video_input == "video":
            media = {
                "videos": [clip.frames for clip in clips],
                "video_metadata": [clip.video_metadata() for clip in clips],
                "do_sample_frames": False,
            }
        else:
            media = {"images": [clip.frames for clip in clips]}
        # A chat template writes its own special tokens; a plain prompt gets the tokenizer's.
        return self.processor(
            text=texts, padding=True, return_tensors="pt", add_special_tokens=self.chat_template is None, **media
        )

    def num_visual_tokens(self, inputs) -> int:
        """The image and video placeholder tokens in a batch's `input_ids` (the frames' cost in the context)."""
        ids = {getattr(self.processor, name, None) for name in ("image_token_id", "video_token_id")} - {None}
        return int(sum((inputs["input_ids"] == token_id).sum() for token_id in ids))

    def inputs(self, rows) -> "list[tuple[list[int], BatchFeature]]":
        """The batch as groups of rows, each its rows' positions in the batch and the processor's output for them.

        Each clip is decoded once. With --fps clips may give different numbers of frames, and the
        processors that stack a batch's videos (LLaVA-OneVision, InternVL, ...) need them equal:
        clips are put to the model in groups of equal frame counts.
        """
        clips = [sample_frames(row["video"], self.sampling) for row in rows]
        groups: dict[int, list[int]] = {}
        for index, clip in enumerate(clips):
            groups.setdefault(len(clip.frames), []).append(index)
        return [
            (indices, self._processed([rows[i] for i in indices], [clips[i] for i in indices]))
            for indices in groups.values()
        ]

    def replies(self, inputs):
        replies = [None] * sum(len(indices) for indices, _ in inputs)
        for indices, processed in inputs:
            # Pixel values in the model's dtype (bf16 on GPUs that support it): the processor makes float32.
            processed = processed.to(self.model.device, dtype=self.model.dtype, non_blocking=True)
            for index, generated in zip(indices, self._generate(processed, self.processor)):
                replies[index] = generated
        return replies


PREDICTORS = {"fiber": FiberPredictor, "seq2seq": Seq2SeqPredictor, "causal": CausalPredictor, "video": VideoPredictor}
