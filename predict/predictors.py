"""The predictor of each kind of model `fiberbench predict` runs, and the paper-format kinds: FIBER models, seq2seq LMs.

A `Predictor` subclass runs one kind of model (a `Kind`, declared in the registry `kinds.KINDS`:
its name, how messages name it, the class that loads it): which configs it loads (`loads`), what
each row of the dataset must hold for it, and how it answers. A batch is
answered in two steps: `inputs` makes what the model reads from the batch's rows on the CPU,
without the model (the captions tokenized, a clip's frames decoded and processed), which
`fiberbench predict` does in its data loader's worker processes (`clips.make_loader`); then the paper-format
predictors give, for each clip, its ranked, distinct candidate answers (one per beam,
`candidates`), the prompted ones (`prompted`) each clip's replies (one per beam, `replies`).

- `fiber` (`FiberT5ForConditionalGeneration`): the paper's format plus the clip's video features (the
  dataset config its `video_features_name` names: `i3d`, or an encoder's), answered by `fill_blanks`' beams.
- `seq2seq` (`AutoModelForSeq2SeqLM`): the paper's zero-shot format, the blank as T5's
  `<extra_id_0>`; the answer is the text between `<extra_id_0>` and `<extra_id_1>`.

The kinds that reply in words are in `prompted` (causal LMs) and `video` (video-language models);
`kinds` registers them all.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import datasets
    import torch

    from fiberbench.records import ClipKey
    from fiberbench.videos import ClipVideo

    from fiberbench.predict.settings import PredictSettings

# FIBER models, and T5 checkpoints run as text-only ones (--model_type fiber).
FIBER_MODEL_TYPES = ("fiber_t5", "t5")


@dataclass(frozen=True)
class Kind:
    """A kind of model `fiberbench predict` runs, as the registry (`kinds.KINDS`) declares it: one row each."""

    name: str  # as --model_type gives it, and the predictions' metadata records it
    predictor: "type[Predictor]"  # what runs it
    described: str  # as messages name it ("a seq2seq LM")
    model_class: str  # the transformers class that loads it ("AutoModelForSeq2SeqLM")
    # transformers' mapping (config class -> model class) behind `model_class`, models registered by packages included
    model_mapping: str | None = None

    def loads(self, config) -> bool:
        """Whether `model_class` loads the model of `config` (as its predictor says: `Predictor.loads`)."""
        return self.predictor.loads(self, config)

    def describes(self, config) -> bool:
        """Whether `config` is read as a model of this kind when --model_type does not say (`kinds.detect_kind`)."""
        return self.predictor.describes(self, config)


class Predictor:
    """One kind of model: its settings (recorded with the predictions) before loading, then its answers.

    `load_model` is separate from the constructor so that everything that could refuse the run
    (the tokenizer, the prompt, an existing output with other settings) is checked before the
    weights are read.
    """

    prompted = False  # it reads --prompt and replies in words, which the answer reader reads (`PromptedPredictor`)
    dataset_config = "text"
    reads_features = False  # each row has the clip's I3D `video_features`
    reads_video = False  # each row has the clip's `video` (a `ClipVideo`), from --video_dir

    @classmethod
    def loads(cls, kind: Kind, config) -> bool:
        """Whether the `kind.model_class` loads the model of `config`: by its config class, or remote code's
        `auto_map`."""
        import transformers

        auto_map = getattr(config, "auto_map", None) or {}
        return type(config) in getattr(transformers, kind.model_mapping) or kind.model_class in auto_map

    @classmethod
    def describes(cls, kind: Kind, config) -> bool:
        """Whether `config` is read as a model of `kind` when --model_type does not say."""
        return cls.loads(kind, config)

    def __init__(self, kind: Kind, settings: "PredictSettings", loading: dict, config):
        self.kind = kind
        self.settings = settings
        self.loading = loading  # from_pretrained's keyword arguments (`ModelSource.loading`)
        self.num_beams = settings.num_beams or 1
        self.model = None

    def __getstate__(self) -> dict:
        # A predictor is copied to data loader workers (pickled where they are spawned) to make inputs: not its model.
        return self.__dict__ | {"model": None}

    def prepare_clips(self, split: "datasets.Dataset", keys: "list[ClipKey]") -> "list[ClipVideo | None] | None":
        """What this kind reads beyond each row of `split` (its clips, `keys`), found and checked before any
        generation: each clip's video for the kinds that read one, else None. The kinds that reply in words also
        render every prompt here (`PromptedPredictor.render_texts`), so that a broken template stops the run first."""
        return None

    def decoding(self) -> dict:
        """The generation settings, exactly as `generate` gets them."""
        return {"num_beams": self.num_beams, "max_new_tokens": self.settings.max_new_tokens, "do_sample": False}

    def video_settings(self) -> dict | None:
        """How the clips' videos reach the model, as the predictions' metadata records it (None: it reads none)."""
        return None

    def prompt(self, masked_caption: str) -> dict:
        """How a caption is put to the model, with the exact input of `masked_caption`."""
        raise NotImplementedError

    def load_model(self, device: "torch.device", dtype: "torch.dtype") -> None:
        """The weights, read only now: everything that could refuse the run was checked before."""
        import transformers

        self.model = self._from_pretrained(getattr(transformers, self.kind.model_class), device, dtype)

    def inputs(self, rows: list[dict]):
        """What the model reads for a batch of rows, each with `masked_caption` (and what the kind reads), made on the
        CPU without the model: `fiberbench predict` makes them in data loader workers (`clips.make_loader`)."""
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

        name = self.settings.model_name_or_path
        placement = {"device_map": self.settings.device_map} if self.settings.device_map else {}
        try:
            model, loading_info = auto_class.from_pretrained(
                name, dtype=dtype, use_safetensors=True, output_loading_info=True, **placement, **self.loading
            )
        except (OSError, ValueError, RuntimeError) as error:
            raise DataError(
                f"--model_name_or_path {name}: cannot be loaded as --model_type {self.kind.name} ({error})"
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

        return {"num_beams": self.num_beams, **PAPER_DECODING, "max_new_tokens": self.settings.max_new_tokens}

    def prompt(self, masked_caption: str) -> dict:
        return {
            "format": "the paper's: the blank as <extra_id_0>, the answer between <extra_id_0> and <extra_id_1>",
            "video": None,
            "example": self.processor.tokenizer.decode(self.processor(masked_caption).input_ids[0]),
        }


class FiberPredictor(PaperFormatPredictor):
    """This project's models: the paper's decoding through `fill_blanks`, with the video features they were trained on
    unless text-only."""

    @classmethod
    def loads(cls, kind, config) -> bool:
        return config.model_type in FIBER_MODEL_TYPES

    @classmethod
    def describes(cls, kind, config) -> bool:
        from fiberbench.modeling import FiberT5Config

        return isinstance(config, FiberT5Config)

    def __init__(self, kind, settings, loading: dict, config):
        super().__init__(kind, settings, loading, config)
        from transformers import AutoProcessor, AutoTokenizer

        from fiberbench.modeling import FiberProcessor
        from fiberbench.modeling.decoding import PAPER_NUM_BEAMS

        # A T5 checkpoint run as a FIBER model (--model_type fiber) is a text-only one.
        self.fusion = getattr(config, "fusion", "none")
        self.features_name = getattr(config, "video_features_name", "i3d")
        self.dataset_config = "text" if self.fusion == "none" else self.features_name
        self.reads_features = self.fusion != "none"
        self.num_beams = settings.num_beams or PAPER_NUM_BEAMS[self.fusion]
        name = settings.model_name_or_path
        try:
            processor = AutoProcessor.from_pretrained(name, **loading)
        except (OSError, ValueError):
            processor = None
        if not isinstance(processor, FiberProcessor):  # saved without its processor: the tokenizer is enough
            processor = FiberProcessor(AutoTokenizer.from_pretrained(name, **loading))
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

    def __init__(self, kind, settings, loading: dict, config):
        super().__init__(kind, settings, loading, config)
        from transformers import AutoTokenizer

        from fiberbench.errors import UsageError
        from fiberbench.modeling import FiberProcessor
        from fiberbench.modeling.decoding import ZERO_SHOT_NUM_BEAMS

        self.num_beams = settings.num_beams or ZERO_SHOT_NUM_BEAMS
        tokenizer = AutoTokenizer.from_pretrained(settings.model_name_or_path, **loading)
        try:
            self.processor = FiberProcessor(tokenizer)
        except ValueError as error:
            raise UsageError(
                f"--model_name_or_path {settings.model_name_or_path}: the paper's zero-shot format needs T5's sentinel "
                f"tokens ({error})"
            ) from error

    def inputs(self, rows):
        return self.processor([row["masked_caption"] for row in rows])

    def candidates(self, inputs):
        import torch

        from fiberbench.modeling.decoding import generate_candidates

        with torch.inference_mode():
            return generate_candidates(self.model, self.processor, inputs, **self.decoding())
