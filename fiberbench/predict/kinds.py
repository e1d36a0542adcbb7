"""The kinds of model `fiberbench predict` runs, told apart by their config, and how each kind answers a batch of clips.

- `fiber` (`FiberT5ForConditionalGeneration`): the paper's format plus the clip's I3D features (the
  dataset's `i3d` config), answered by `fill_blanks`' beams.
- `seq2seq` (`AutoModelForSeq2SeqLM`): the paper's zero-shot format, the blank as T5's
  `<extra_id_0>`; the answer is the text between `<extra_id_0>` and `<extra_id_1>`.
- `causal` (`AutoModelForCausalLM`): a prompt template (`{masked_caption}`), through the chat
  template when the tokenizer has one; it replies in words.
- `video` (`AutoModelForImageTextToText` + `AutoProcessor`): frames sampled from the clip's video,
  as images, then the prompt; it replies in words.

The paper-format predictors give, for each clip of a batch, its ranked, distinct candidate answers
(one per beam, `candidates`); the prompted ones give each clip's replies (one per beam, `replies`),
which `fiberbench predict` reads with the answer reader (`replies.read_answers`). Then it picks the
answer. Video-language models get the frames through their image processor: transformers' video
processors need torchvision, and a model that takes several images takes a clip's frames that way.
"""

import torch

from .videos import sample_frames

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

    def decoding(self) -> dict:
        """The generation settings, exactly as `generate` gets them."""
        return {"num_beams": self.num_beams, "max_new_tokens": self.args.max_new_tokens, "do_sample": False}

    def prompt(self, masked_caption: str) -> dict:
        """How a caption is put to the model, with the exact input of `masked_caption`."""
        raise NotImplementedError

    def load_model(self, device: torch.device, dtype: torch.dtype) -> None:
        raise NotImplementedError

    def candidates(self, rows: list[dict]) -> list[list[str]]:
        """Each row's ranked, distinct answers; a row has `masked_caption` (and what the kind reads).

        Paper-format kinds only; models that reply in words (`PromptedPredictor`) give `replies`.
        """
        raise NotImplementedError

    def _from_pretrained(self, auto_class, device, dtype):
        """The model from its safetensors weights (never a pickle, which can run code), on `device`, in eval mode."""
        from fiberbench.errors import DataError
        from fiberbench.modeling.modeling_fiber_t5 import weights_mismatch

        name = self.args.model_name_or_path
        try:
            model, loading_info = auto_class.from_pretrained(
                name, dtype=dtype, use_safetensors=True, output_loading_info=True, **self.loading
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
        return model.to(device).eval()


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
    """This project's models: the paper's decoding through `fill_blanks`, with I3D features unless text-only."""

    kind = "fiber"

    def __init__(self, args, loading: dict, config):
        super().__init__(args, loading, config)
        from transformers import AutoProcessor, AutoTokenizer

        from fiberbench.modeling import FiberProcessor
        from fiberbench.modeling.decoding import PAPER_NUM_BEAMS

        # A T5 checkpoint run as a FIBER model (--model_type fiber) is a text-only one.
        self.fusion = getattr(config, "fusion", "none")
        self.dataset_config = "text" if self.fusion == "none" else "i3d"
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
        video = f"the clip's I3D features ({self.fusion} fusion)" if self.reads_features else None
        return super().prompt(masked_caption) | {"video": video}

    def load_model(self, device, dtype):
        from fiberbench.modeling import FiberT5ForConditionalGeneration

        self.model = self._from_pretrained(FiberT5ForConditionalGeneration, device, dtype)
        # fill_blanks decodes with the generation config: the paper's settings, as recorded by `decoding`.
        self.model.generation_config.update(**{k: v for k, v in self.decoding().items() if k != "num_beams"})

    def candidates(self, rows):
        filled = self.model.fill_blanks(
            self.processor,
            [row["masked_caption"] for row in rows],
            video_features=[row["video_features"] for row in rows] if self.reads_features else None,
            num_beams=self.num_beams,
            only_noun_phrases=False,
            return_candidates=True,
            batch_size=len(rows),
        )
        return [ranked for _, ranked in filled]


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

    def candidates(self, rows):
        from fiberbench.modeling.decoding import generate_candidates

        with torch.inference_mode():
            return generate_candidates(
                self.model, self.processor, [row["masked_caption"] for row in rows], **self.decoding()
            )


class PromptedPredictor(Predictor):
    """Models that read a prompt and reply in words (causal and video-language): their shared prompt and replies.

    The exact text of every caption is rendered once, up front (`render_texts`): a chat template
    from the model's folder is its author's code, run bounded in a child process (`chat_templates`).
    """

    chat_template: str | None
    texts: dict[str, str]  # masked caption -> the exact text the model reads, from `render_texts`

    def _pad_on_the_left(self, tokenizer) -> None:
        # Every prompt of a batch then ends where generation starts.
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.tokenizer = tokenizer

    def text(self, masked_caption: str) -> str:
        """The exact text the model reads for a caption, rendered here (see `render_texts`)."""
        raise NotImplementedError

    def render_texts(self, masked_captions: list[str]) -> None:
        """Render the text of every caption of the run, a chat template in a bounded child process (a `DataError`
        names what went wrong), and keep them for `rendered`."""
        from .chat_templates import render_bounded

        if self.chat_template is None:  # the --prompt template alone, which check_template checked
            self.texts = {caption: self.text(caption) for caption in masked_captions}
        else:
            self.texts = render_bounded(self.text, masked_captions, self.args.model_name_or_path)

    def rendered(self, masked_caption: str) -> str:
        """The text of a caption, as `render_texts` rendered it."""
        return self.texts[masked_caption]

    def prompt(self, masked_caption: str) -> dict:
        return {
            "template": self.args.prompt,
            "chat_template": self.chat_template,
            "example": self.rendered(masked_caption),
        }

    def replies(self, rows: list[dict]) -> list[list[str]]:
        """Each row's replies as generated, one per beam, best first; a row has `masked_caption` (and what the kind
        reads)."""
        raise NotImplementedError

    def _generate(self, inputs, decoder) -> list[list[str]]:
        """Generate from a batch of `inputs`: each clip's replies (one per beam, best first), decoded by `decoder`."""
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

    def text(self, masked_caption):
        prompt = self.args.prompt.format(masked_caption=masked_caption)
        if self.chat_template is None:
            return prompt
        return self.tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
        )

    def load_model(self, device, dtype):
        from transformers import AutoModelForCausalLM

        self.model = self._from_pretrained(AutoModelForCausalLM, device, dtype)

    def replies(self, rows):
        # A chat template writes its own special tokens (BOS); a plain prompt gets the tokenizer's.
        inputs = self.tokenizer(
            [self.rendered(row["masked_caption"]) for row in rows],
            padding=True,
            add_special_tokens=self.chat_template is None,
            return_tensors="pt",
        ).to(self.model.device)
        return self._generate(inputs, self.tokenizer)


class VideoPredictor(PromptedPredictor):
    """Video-language models: `--num_frames` frames of the clip's video, as images, then the prompt."""

    kind = "video"
    reads_video = True

    def __init__(self, args, loading: dict, config):
        super().__init__(args, loading, config)
        from transformers import AutoProcessor

        from fiberbench.errors import UsageError

        self.processor = AutoProcessor.from_pretrained(args.model_name_or_path, **loading)
        self.chat_template = self.processor.chat_template
        if getattr(self.processor, "image_processor", None) is None:
            raise UsageError(
                f"--model_name_or_path {args.model_name_or_path}: its processor ({type(self.processor).__name__}) has "
                "no image processor to read the clip's frames"
            )
        if self.chat_template is None and getattr(self.processor, "image_token", None) is None:
            raise UsageError(
                f"--model_name_or_path {args.model_name_or_path}: its processor has neither a chat template nor an "
                "image token, so there is no known way to place the frames in the prompt"
            )
        self._pad_on_the_left(self.processor.tokenizer)

    def text(self, masked_caption):
        prompt = self.args.prompt.format(masked_caption=masked_caption)
        if self.chat_template is None:
            return self.processor.image_token * self.args.num_frames + prompt
        images = [{"type": "image"} for _ in range(self.args.num_frames)]
        return self.processor.apply_chat_template(
            [{"role": "user", "content": [*images, {"type": "text", "text": prompt}]}],
            add_generation_prompt=True,
            tokenize=False,
        )

    def load_model(self, device, dtype):
        from transformers import AutoModelForImageTextToText

        self.model = self._from_pretrained(AutoModelForImageTextToText, device, dtype)

    def replies(self, rows):
        frames = [sample_frames(row["video"], self.args.num_frames) for row in rows]
        inputs = self.processor(
            text=[self.rendered(row["masked_caption"]) for row in rows], images=frames, padding=True, return_tensors="pt"
        ).to(self.model.device, dtype=self.model.dtype)
        return self._generate(inputs, self.processor)


PREDICTORS = {"fiber": FiberPredictor, "seq2seq": Seq2SeqPredictor, "causal": CausalPredictor, "video": VideoPredictor}
