"""The kinds of model `fiberbench predict` runs (`KINDS`, read from the config) and their predictors: FIBER models and
seq2seq LMs answer in the paper's format (a FIBER model reading the video features it was trained on); causal LMs and
video LLMs read --prompt (through the chat template when there is one; a video LLM the frames of each clip's video, as
a video when its processor has a video processor, else as images) and reply in words, which the answer reader reads.
With --video_input none each runs blind, the same weights, prompt and decoding without the video: the blind control.
A batch goes in two steps: `inputs` (on the CPU, in the data loader's workers: groups of rows the model reads at once)
then `generate` (each row's beams, best first)."""

import contextlib
from pathlib import Path

import torch
import transformers as t
from transformers import AutoProcessor, AutoTokenizer
from transformers.utils import SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME

from fiberbench.errors import DataError, FiberbenchError, UsageError
from fiberbench.modeling import FiberProcessor, FiberT5Config, FiberT5ForConditionalGeneration
from fiberbench.modeling.decoding import PAPER_DECODING, PAPER_NUM_BEAMS, ZERO_SHOT_NUM_BEAMS, generate_candidates
from fiberbench.modeling.modeling_fiber_t5 import weights_mismatch
from fiberbench.predict.arguments import DEFAULT_NUM_FRAMES
from fiberbench.videos import FrameSampling, choose_sampling, sample_frames

# Kind (--model_type) -> how messages name it, the class and mapping that load it; in the order a config is matched (a
# FIBER config is also a seq2seq one; some, Gemma 3's, are image-text and causal).
KINDS = {
    "fiber": ("a FIBER model", FiberT5ForConditionalGeneration, None),
    "video": ("a video-language model", t.AutoModelForImageTextToText, t.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING),
    "seq2seq": ("a seq2seq LM", t.AutoModelForSeq2SeqLM, t.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING),
    "causal": ("a causal LM", t.AutoModelForCausalLM, t.MODEL_FOR_CAUSAL_LM_MAPPING),
}
PROMPTED_KINDS = ("video", "causal")
# The length T5 was trained on (Raffel et al., 2020, §3.1.2): --max_new_tokens at most, where no positions are stated.
T5_TRAINED_LENGTH = 512
SAMPLING_DEFAULTS = ("do_sample_frames", "fps", "num_frames", "min_frames", "max_frames")


def loads(kind: str, config) -> bool:
    """Whether the class of `kind` loads `config`'s model: by its config class, or remote code's `auto_map`."""
    if kind == "fiber":
        return config.model_type in ("fiber_t5", "t5")  # a T5 checkpoint runs as a text-only FIBER model
    _, model_class, mapping = KINDS[kind]
    return type(config) in mapping or model_class.__name__ in (getattr(config, "auto_map", None) or {})


def choose_kind(args, config) -> str:
    """--model_type, else the kind the config describes; checked to load so, and the flags only some kinds read."""
    detected = "fiber" if isinstance(config, FiberT5Config) else next(
        (kind for kind in ("video", "seq2seq", "causal") if loads(kind, config)), None)
    kind = args.model_type or detected
    name, described = args.model_name_or_path, KINDS.get(kind, ("",))[0]
    if kind is None:
        kinds = ", ".join(f"{described} ({model_class.__name__})" for described, model_class, _ in KINDS.values())
        raise UsageError(f"--model_name_or_path {name}: model type {config.model_type!r} is none of the kinds "
                         f"fiberbench predict runs: {kinds}")
    if not loads(kind, config):
        read = f"; its config makes it {KINDS[detected][0]}" if detected else ""
        raise UsageError(f"--model_type {kind}: {name} is a {config.model_type!r} model, which "
                         f"{KINDS[kind][1].__name__} does not load{read}")
    folder = Path(name).expanduser()
    if folder.is_dir() and not any((folder / file).is_file() for file in (SAFE_WEIGHTS_NAME, SAFE_WEIGHTS_INDEX_NAME)):
        raise DataError(f"--model_name_or_path {name}: no {SAFE_WEIGHTS_NAME} in it; fiberbench predict reads only "
                        "safetensors weights, never a pickle (which can run code)")
    if kind not in PROMPTED_KINDS:
        if args.prompt is not None:
            raise UsageError(f"--prompt is for causal and video-language models; {described} uses the paper's format")
        if args.read_noun_phrases is not None:
            flag = "--read_noun_phrases" if args.read_noun_phrases else "--no_read_noun_phrases"
            raise UsageError(f"{flag} is for causal and video-language models, which reply in words; {described} "
                             "answers in the paper's format")
    if kind == "video" and args.video_dir is None and args.video_input != "none":
        raise UsageError(f"{name} is a video-language model: give --video_dir with the clips' videos (or --model_type "
                         "causal to run it on the captions alone)")
    for flag in ("video_dir", "video_input", "num_frames", "fps", "max_frames", "skip_missing_videos"):
        if kind != "video" and getattr(args, flag) not in (None, False, "none"):  # any model can run blind
            raise UsageError(f"--{flag} is for video-language models; {described} does not read videos")
    positions = getattr(config.get_text_config(), "max_position_embeddings", None)
    if args.max_new_tokens > (positions or T5_TRAINED_LENGTH):
        bound = (f"the {positions} positions of {name}'s text model" if positions else f"{name} generates (it states "
                 f"no maximum of positions: at most {T5_TRAINED_LENGTH}, the length T5 was trained on)")
        raise UsageError(f"--max_new_tokens {args.max_new_tokens}: more than {bound}")
    return kind


def make_predictor(kind: str, args, source, config) -> "Predictor":
    """The predictor of `kind`, with its tokenizer or processor (not its weights yet)."""
    try:
        return {"fiber": FiberPredictor, "seq2seq": Seq2SeqPredictor, "causal": CausalPredictor,
                "video": VideoPredictor}[kind](kind, args, source, config)
    except (OSError, ValueError) as error:
        if isinstance(error, FiberbenchError):
            raise
        raise DataError(f"--model_name_or_path {args.model_name_or_path}: cannot read its tokenizer or processor "
                        f"({error})") from error


class Predictor:
    """One kind of model: what it reads of each row, its settings (recorded with the predictions), then its beams."""

    prompted, chat_template, processor = False, None, None  # prompted: it reads --prompt and replies in words
    reads_features, reads_video, dataset_config = False, False, "text"  # a row's `video_features`, its `video`
    video_input = "none"  # how the model sees the clip, as the settings record it: text models never do

    def __init__(self, kind: str, args, source, config):
        self.kind, self.args, self.loading, self.model = kind, args, source.loading(), None
        self.num_beams = args.num_beams or 1

    def __getstate__(self) -> dict:
        return self.__dict__ | {"model": None}  # a copy for the data loader's workers, which make inputs only

    def decoding(self) -> dict:  # the generation settings, as `generate` gets them
        return {"num_beams": self.num_beams, "max_new_tokens": self.args.max_new_tokens, "do_sample": False}

    def load_model(self, device, dtype) -> None:
        """The weights, from safetensors only (a pickle can run code), read once everything else was checked."""
        name, device_map = self.args.model_name_or_path, self.args.device_map
        placement = {"device_map": device_map} if device_map else {}
        try:
            model, info = KINDS[self.kind][1].from_pretrained(
                name, dtype=dtype, use_safetensors=True, output_loading_info=True, **placement, **self.loading)
        except (OSError, ValueError, RuntimeError) as error:
            raise DataError(f"--model_name_or_path {name}: cannot be loaded as --model_type {self.kind} ({error})") \
                from error
        if mismatch := weights_mismatch(info):
            raise DataError(f"--model_name_or_path {name}: its weights do not match its config ({mismatch}); it would "
                            "run with random or missing weights")
        self.model = (model if placement else model.to(device)).eval()

    def generate(self, groups) -> list[list[str]]:
        """Each row's beams (best first), from the groups `inputs` made: (the rows' positions in the batch, inputs)."""
        beams = {}
        with torch.inference_mode():
            for positions, inputs in groups:
                beams.update(zip(positions, self._generate(inputs)))
        return [beams[position] for position in sorted(beams)]


class PaperFormatPredictor(Predictor):
    """Models that answer in the paper's format (T5's sentinels) and decode as the paper: FIBER and seq2seq LMs."""

    def decoding(self):
        return {"num_beams": self.num_beams, **PAPER_DECODING, "max_new_tokens": self.args.max_new_tokens}

    def prompt(self, masked_caption: str, video=None) -> dict:
        example = self.processor.tokenizer.decode(self.processor(masked_caption).input_ids[0])
        return {"format": "the paper's: the blank as <extra_id_0>, the answer between <extra_id_0> and <extra_id_1>",
                "video": video, "example": example}

    def inputs(self, rows):
        features = [row["video_features"] for row in rows] if self.reads_features else None
        captions = [row["masked_caption"] for row in rows]
        return [(list(range(len(rows))), self.processor(captions, video_features=features))]


class Seq2SeqPredictor(PaperFormatPredictor):
    def __init__(self, kind, args, source, config):
        super().__init__(kind, args, source, config)
        self.num_beams = args.num_beams or ZERO_SHOT_NUM_BEAMS
        try:
            self.processor = FiberProcessor(AutoTokenizer.from_pretrained(args.model_name_or_path, **self.loading))
        except ValueError as error:
            raise UsageError(f"--model_name_or_path {args.model_name_or_path}: the paper's zero-shot format needs T5's "
                             f"sentinel tokens ({error})") from error

    def _generate(self, inputs):
        return generate_candidates(self.model, self.processor, inputs, **self.decoding())


class FiberPredictor(PaperFormatPredictor):
    def __init__(self, kind, args, source, config):
        super().__init__(kind, args, source, config)
        # A T5 checkpoint run as a FIBER model (--model_type fiber) is a text-only one.
        self.fusion = getattr(config, "fusion", "none")
        self.features_name = getattr(config, "video_features_name", "i3d")
        self.video_size = getattr(config, "video_feature_size", None)
        self.reads_features = self.fusion != "none" and args.video_input != "none"
        self.video_input = "features" if self.reads_features else "none"
        self.dataset_config = self.features_name if self.reads_features else "text"
        self.num_beams = args.num_beams or PAPER_NUM_BEAMS[self.fusion]
        with contextlib.suppress(OSError, ValueError):
            self.processor = AutoProcessor.from_pretrained(args.model_name_or_path, **self.loading)
        if not isinstance(self.processor, FiberProcessor):  # saved without its processor: the tokenizer is enough
            self.processor = FiberProcessor(AutoTokenizer.from_pretrained(args.model_name_or_path, **self.loading))

    def prompt(self, masked_caption, video=None):
        features = f"the clip's {self.features_name} features ({self.fusion} fusion)"
        withheld = f"withheld: one frame marked as padding, which the {self.fusion} fusion encoder leaves out"
        return super().prompt(masked_caption, features if self.reads_features else None if self.fusion == "none" else
                              withheld)

    def inputs(self, rows):
        if self.reads_features or self.fusion == "none":
            return super().inputs(rows)
        # Blind: the model's own path for a clip without frames. A frame whose video_attention_mask is 0 is padding,
        # which the encoder's `pack` drops, so the caption alone goes through the same weights.
        [(positions, batch)] = super().inputs(rows)
        batch["video_features"] = torch.zeros(len(rows), 1, self.video_size)
        batch["video_attention_mask"] = torch.zeros(len(rows), 1, dtype=torch.long)
        return [(positions, batch)]

    def load_model(self, device, dtype):
        super().load_model(device, dtype)
        # `blank_candidates` decodes with the generation config: the paper's settings, as `decoding` records them.
        self.model.generation_config.update(**{k: v for k, v in self.decoding().items() if k != "num_beams"})

    def _generate(self, inputs):
        return self.model.blank_candidates(self.processor, inputs, self.num_beams)


class PromptedPredictor(Predictor):
    """Models that read --prompt and reply in words (causal and video-language)."""

    prompted = True

    def _tokenizer_padding_left(self, tokenizer):
        tokenizer.padding_side = "left"  # every prompt of a batch then ends where generation starts
        tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
        self.tokenizer = tokenizer

    def render(self, renderer, content) -> str:
        """The chat template on one user message (`content`). It is the model author's code, run as transformers
        runs it: whatever it raises is one line naming the model."""
        try:
            return renderer.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                                tokenize=False)
        except Exception as error:  # noqa: BLE001 - a template raises what its author wrote (jinja2, TypeError, ...)
            raise DataError(f"--model_name_or_path {self.args.model_name_or_path}: its chat template cannot be "
                            f"rendered ({type(error).__name__}: {' '.join(str(error).split())[:300]})") from error

    def prompt(self, masked_caption: str) -> dict:
        return {"template": self.args.prompt, "chat_template": self.chat_template, "example": self.text(masked_caption)}

    def _generate(self, inputs):
        # Floating inputs (pixels) in the model's dtype; non_blocking: from a pinned batch the copy does not wait.
        model = self.model
        inputs = {key: value.to(model.device, model.dtype if value.is_floating_point() else None, non_blocking=True)
                  if torch.is_tensor(value) else value for key, value in inputs.items()}
        sequences = self.model.generate(**inputs, num_return_sequences=self.num_beams,
                                        pad_token_id=self.tokenizer.pad_token_id, **self.decoding())
        replies = self.tokenizer.batch_decode(sequences[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
        return [replies[start : start + self.num_beams] for start in range(0, len(replies), self.num_beams)]


class CausalPredictor(PromptedPredictor):
    def __init__(self, kind, args, source, config):
        super().__init__(kind, args, source, config)
        self._tokenizer_padding_left(AutoTokenizer.from_pretrained(args.model_name_or_path, **self.loading))
        self.chat_template = self.tokenizer.chat_template

    def text(self, masked_caption: str) -> str:
        prompt = self.args.prompt.format(masked_caption=masked_caption)
        return prompt if self.chat_template is None else self.render(self.tokenizer, prompt)

    def inputs(self, rows):
        texts = [self.text(row["masked_caption"]) for row in rows]
        plain = self.chat_template is None  # a chat template writes its own special tokens (BOS); a plain prompt not
        encoded = self.tokenizer(texts, padding=True, add_special_tokens=plain, return_tensors="pt")
        return [(list(range(len(rows))), encoded)]


class VideoPredictor(PromptedPredictor):
    """Frames of the clip's video, as a video (the processor's video processor with the clip's `video_metadata`, the
    chat template's `{"type": "video"}` part; it samples no frames again) or as images (one image part per frame); or
    blind (--video_input none), the chat without its video part."""

    placeholder = None  # the processor's video or image token

    def __init__(self, kind, args, source, config):
        super().__init__(kind, args, source, config)
        name = args.model_name_or_path
        try:
            self.processor = AutoProcessor.from_pretrained(name, **self.loading)
        except ImportError as error:  # transformers' video processors need torchvision
            raise UsageError(f"--model_name_or_path {name}: its processor cannot be built here "
                             f"({str(error).split('. ')[0]}); install torch and torchvision as a pair, then pip "
                             'install -e ".[video]" (README: "Evaluate a video LLM")') from error
        self.chat_template = self.processor.chat_template
        video_processor = getattr(self.processor, "video_processor", None)
        described = f"--model_name_or_path {name}: its processor ({type(self.processor).__name__})"
        if args.video_input == "video" and video_processor is None:
            raise UsageError(f"--video_input video: {described} has no video processor; use --video_input images")
        automatic = "images" if video_processor is None else "video"
        self.video_input = automatic if args.video_input in (None, "auto") else args.video_input
        self.reads_video = self.video_input != "none"
        self._tokenizer_padding_left(self.processor.tokenizer)
        if not self.reads_video:
            return
        self.placeholder = getattr(self.processor, f"{self.video_input.rstrip('s')}_token", None)
        if self.video_input == "images" and getattr(self.processor, "image_processor", None) is None:
            raise UsageError(f"{described} has no image processor to read the clip's frames as images")
        if self.chat_template is None and self.placeholder is None:
            raise UsageError(f"{described} has neither a chat template nor a {self.video_input.rstrip('s')} token, so "
                             "there is no known way to place the clip in the prompt")
        defaults = ((name, getattr(video_processor, name, None)) for name in SAMPLING_DEFAULTS)
        self.processor_defaults = {name: value for name, value in defaults if value is not None}
        self.sampling, self.sampling_chosen_by = self._frame_sampling(type(video_processor).__name__)

    def _frame_sampling(self, processor_name: str) -> tuple[FrameSampling, str]:
        """--num_frames, else --fps (up to --max_frames), else the video processor's own rate or number of frames,
        else `DEFAULT_NUM_FRAMES`; and what chose them."""
        defaults, by, args = self.processor_defaults, f"the defaults of {processor_name}", self.args
        default = (FrameSampling(fps=defaults["fps"], max_frames=defaults.get("max_frames", defaults.get("num_frames")))
                   if "fps" in defaults else FrameSampling(num_frames=defaults.get("num_frames", DEFAULT_NUM_FRAMES)))
        if not {"fps", "num_frames"} & defaults.keys():
            by = f"fiberbench's default ({DEFAULT_NUM_FRAMES} frames)"
        flag = next((f"--{name}" for name in ("num_frames", "fps") if getattr(args, name) is not None), by)
        return choose_sampling(args.num_frames, args.fps, args.max_frames, default), flag

    def video_settings(self) -> dict:
        """How the clips' frames are taken, as the predictions' metadata records it (beside `video_input`)."""
        metadata = "fps, duration, total_num_frames and frames_indices of each clip, counted from its start"
        return {**vars(self.sampling), "frames": self.sampling.rule(),
                "chosen_by": self.sampling_chosen_by, "processor_defaults": self.processor_defaults,
                "video_metadata": metadata if self.video_input == "video" else None}

    def text(self, masked_caption: str, num_frames: int | None = None) -> str:
        """The prompt with the clip's placeholder: one video part, one image part per frame, or none (blind)."""
        prompt = self.args.prompt.format(masked_caption=masked_caption)
        parts = (num_frames or self.sampling.num_frames or 1) if self.video_input == "images" else int(self.reads_video)
        if self.chat_template is None:
            return (self.placeholder or "") * parts + prompt
        content = [{"type": self.video_input.rstrip("s")}] * parts + [{"type": "text", "text": prompt}]
        text = self.render(self.processor, content)
        if self.placeholder is not None and self.placeholder not in text:
            part, other = ("a video part", "images") if self.video_input == "video" else ("an image part", "video")
            raise UsageError(f"--model_name_or_path {self.args.model_name_or_path}: its processor "
                             f"({type(self.processor).__name__}): its chat template writes no {self.placeholder} for "
                             f"{part}, so the clip cannot be put in the prompt that way; try --video_input {other}")
        return text

    def inputs(self, rows):
        """Each clip decoded once; clips in groups of equal frame counts (with --fps they differ, and the processors
        that stack a batch's videos, LLaVA-OneVision's and InternVL's, need them equal)."""
        clips = [sample_frames(row["video"], self.sampling) if self.reads_video else None for row in rows]
        groups: dict[int, list[int]] = {}
        for position, clip in enumerate(clips):
            groups.setdefault(len(clip.frames) if clip else 0, []).append(position)
        made = []
        for count, positions in groups.items():
            frames = [clips[position].frames for position in positions] if count else None
            media = {} if not count else {"images": frames} if self.video_input == "images" else {
                "videos": frames, "video_metadata": [clips[position].video_metadata() for position in positions],
                "do_sample_frames": False}
            texts = [self.text(rows[position]["masked_caption"], count) for position in positions]
            # A chat template writes its own special tokens; a plain prompt gets the tokenizer's.
            made.append((positions, self.processor(text=texts, padding=True, return_tensors="pt",
                                                   add_special_tokens=self.chat_template is None, **media)))
        return made
