"""FiberT5ForConditionalGeneration: T5 that fills a caption's blank, reading I3D features by early or late fusion."""

import contextlib
import copy
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from torch import nn
from transformers import T5ForConditionalGeneration
from transformers import initialization as init
from transformers.masking_utils import create_bidirectional_mask
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput
from transformers.models.t5.modeling_t5 import T5Block, T5LayerNorm, T5Stack
from transformers.utils import CONFIG_NAME, SAFE_WEIGHTS_NAME, logging
from transformers.utils.generic import can_return_tuple

from .configuration_fiber_t5 import FiberT5Config
from .decoding import choose_noun_phrases, generate_candidates, paper_generation_config
from .noun_phrases import load_spacy_pipeline
from .processing_fiber import FiberProcessor, check_masked_captions

logger = logging.get_logger(__name__)

# The parameters a T5 checkpoint lacks: the encoder's video modules (`FiberT5Encoder`).
VIDEO_MODULES = ("encoder.video_projection.", "encoder.video_encoder.", "encoder.fusion_encoder.")


def weights_mismatch(loading_info: dict, allowed: tuple[str, ...] = ()) -> str | None:
    """What `from_pretrained(..., output_loading_info=True)` found wrong with a checkpoint's weights, or None.

    transformers leaves missing weights random (a config promising more layers than the weights hold) and drops
    unexpected ones, with only a log line: either way the model that runs is not the one saved. Weights whose names
    start with `allowed` belong to modules expected to be new or dropped (the video modules of a fusion being set).
    """
    found = {kind: sorted(str(key[0] if isinstance(key, tuple) else key) for key in loading_info.get(field, ())
                          if kind == "of another shape" or not str(key).startswith(allowed))
             for kind, field in (("missing", "missing_keys"), ("unexpected", "unexpected_keys"),
                                 ("of another shape", "mismatched_keys"))}
    problems = [f"{len(keys)} {kind} ({', '.join(keys[:3])}{', ...' if len(keys) > 3 else ''})"
                for kind, keys in found.items() if keys]
    return "; ".join(problems) or None


@dataclass
class FiberT5EncoderOutput(BaseModelOutput):
    """
    The encoder's output, plus the mask of `last_hidden_state`.

    attention_mask (`torch.LongTensor` of shape `(batch_size, sequence_length)`):
        1 on the positions the decoder may attend to: the text mask for `fusion="none"`, else the
        mask of the packed text and video. `generate` expands it over beams with the rest of the
        output, so the decoder always gets a mask that matches the encoder's sequence.
    """

    attention_mask: torch.LongTensor | None = None


def pack(
    first: torch.Tensor, first_mask: torch.Tensor, second: torch.Tensor, second_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Concatenate two padded sequences row by row, moving each row's padding to its end.

    T5's relative position bias looks at positions, not at the mask: left between the text and
    the video, the text padding would shift the video by an amount that depends on the other
    captions of the batch, and an example's output would change with its batch. Packed, every
    row reads exactly as it does alone.

    Shapes: (B, L1, d), (B, L1), (B, L2, d), (B, L2) -> (B, L, d), (B, L), where L is the longest
    row without padding.
    """
    hidden = torch.cat([first, second], dim=1)
    mask = torch.cat([first_mask, second_mask.to(first_mask.dtype)], dim=1)
    # A stable sort on "is padding" keeps the real positions first, in their order.
    order = torch.argsort((mask == 0).to(torch.int8), dim=1, stable=True)[:, : int(mask.sum(dim=1).max())]
    return hidden.gather(1, order[..., None].expand(-1, -1, hidden.shape[-1])), mask.gather(1, order)


class FiberT5TransformerStack(nn.Module):
    """T5 encoder blocks over embeddings: the video and fusion transformers of late fusion.

    Like T5's encoder without the token embedding: the first block owns a relative position bias
    that the other blocks share, and a final RMS norm closes the stack.
    """

    def __init__(self, config: FiberT5Config, num_layers: int):
        super().__init__()
        self.config = config
        self.block = nn.ModuleList(
            [T5Block(config, has_relative_attention_bias=i == 0, layer_idx=i) for i in range(num_layers)]
        )
        self.final_layer_norm = T5LayerNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.dropout = nn.Dropout(config.dropout_rate)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        # hidden_states: (B, L, d_model); attention_mask: (B, L)
        mask = create_bidirectional_mask(config=self.config, inputs_embeds=hidden_states, attention_mask=attention_mask)
        hidden_states = self.dropout(hidden_states)
        position_bias = None
        for block in self.block:
            hidden_states, position_bias, _ = block(hidden_states, mask, position_bias)
        return self.dropout(self.final_layer_norm(hidden_states))


class FiberT5Encoder(T5Stack):
    """T5's encoder, extended to read video features (paper §4.2).

    - `"none"`: T5's encoder over the caption.
    - `"early"`: the caption's token embeddings, then the linearly projected video features, through
      T5's encoder as one sequence.
    - `"late"`: T5's encoder over the caption and a video transformer over the projected features,
      then a fusion transformer over both outputs.

    The T5 parameters keep `T5Stack`'s names (`block.*`, `final_layer_norm`), so T5 checkpoints load
    into them as they are; the video parameters are `video_projection`, `video_encoder` and
    `fusion_encoder`.
    """

    def __init__(self, config: FiberT5Config):
        super().__init__(config)
        if config.fusion != "none":
            self.video_projection = nn.Linear(config.video_feature_size, config.d_model)
        if config.fusion == "late":
            self.video_encoder = FiberT5TransformerStack(config, config.num_video_layers)
            self.fusion_encoder = FiberT5TransformerStack(config, config.num_fusion_layers)
        # Again: `T5Stack.__init__` ran it before the video modules existed.
        self.post_init()

    @torch.no_grad()
    def _init_weights(self, module):
        # T5's default would give this new Linear std `initializer_factor` (1.0), blowing the features up
        # ~32x. LeCun-normal instead: each projected unit keeps the mean square of the input features.
        if module is getattr(self, "video_projection", None):
            init.normal_(module.weight, mean=0.0, std=self.config.initializer_factor * module.in_features**-0.5)
            init.zeros_(module.bias)
        else:
            super()._init_weights(module)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        *,  # T5's own arguments, then the video's, by keyword only: a positional call means what it means to T5
        video_features: torch.FloatTensor | None = None,
        video_attention_mask: torch.Tensor | None = None,
        **kwargs,
    ) -> FiberT5EncoderOutput:
        r"""
        Encode a caption and, unless `fusion="none"`, its video: the one place where the two are joined,
        for `forward` and `generate` alike.

        video_features (`torch.FloatTensor` of shape `(batch_size, frames, video_feature_size)`):
            The clip's features (I3D), zero-padded; required unless `fusion="none"`.
        video_attention_mask (`torch.Tensor` of shape `(batch_size, frames)`, *optional*):
            1 on real frames, 0 on padding; all ones when not given.

        Returns a [`FiberT5EncoderOutput`] whose `attention_mask` goes with `last_hidden_state`.
        """
        if (video_features is None) != (self.config.fusion == "none"):
            needs = "takes no video_features." if video_features is not None else "needs video_features."
            raise ValueError(f"A model with fusion={self.config.fusion!r} {needs}")
        if video_features is not None and video_features.shape[-1] != self.config.video_feature_size:
            raise ValueError(f"video_features have {video_features.shape[-1]} values per frame; this model reads "
                             f"video_feature_size={self.config.video_feature_size} (shape (batch, frames, size)).")
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)  # (B, T, d_model)
        if attention_mask is None:
            attention_mask = torch.ones(inputs_embeds.shape[:2], dtype=torch.long, device=inputs_embeds.device)
        if self.config.fusion == "none":
            text = super().forward(inputs_embeds=inputs_embeds, attention_mask=attention_mask, **kwargs)
            return FiberT5EncoderOutput(**text, attention_mask=attention_mask)

        video = self.video_projection(video_features.to(self.video_projection.weight.dtype))  # (B, F, d_model)
        if video_attention_mask is None:
            video_attention_mask = torch.ones(video.shape[:2], dtype=torch.long, device=video.device)
        if self.config.fusion == "early":
            embeds, mask = pack(inputs_embeds, attention_mask, video, video_attention_mask)  # (B, <=T+F, d_model)
            joint = super().forward(inputs_embeds=embeds, attention_mask=mask, **kwargs)
            return FiberT5EncoderOutput(**joint, attention_mask=mask)

        text = super().forward(inputs_embeds=inputs_embeds, attention_mask=attention_mask, **kwargs)
        video = self.video_encoder(video, video_attention_mask)
        hidden, mask = pack(text.last_hidden_state, attention_mask, video, video_attention_mask)
        return FiberT5EncoderOutput(last_hidden_state=self.fusion_encoder(hidden, mask), attention_mask=mask,
                                    hidden_states=text.hidden_states, attentions=text.attentions)


class FiberT5ForConditionalGeneration(T5ForConditionalGeneration):
    r"""
    The FIBER model (paper §4): T5 with a [`FiberT5Encoder`] that also reads the clip's video
    features, trained to generate `<extra_id_0> {answer} <extra_id_1>` for a caption whose blank is
    `<extra_id_0>`. With `fusion="none"` it is exactly [`T5ForConditionalGeneration`].

    Start from any T5 checkpoint with one call: `FiberT5ForConditionalGeneration.from_pretrained(
    "t5-base", fusion="early")`. Use [`FiberProcessor`] for inputs and [`fill_blanks`] for answers.
    """

    config_class = FiberT5Config

    def __init__(self, config: FiberT5Config):
        config.validate_fusion()  # `from_pretrained(..., fusion=...)` sets the field after the config's own check
        super().__init__(config)
        encoder_config = copy.deepcopy(config)
        encoder_config.is_decoder = False
        encoder_config.use_cache = False
        # T5's encoder is replaced by the one that reads video too; its weights keep their names. (The
        # plain one built above costs nothing under `from_pretrained`, which builds on the meta device.)
        self.encoder = FiberT5Encoder(encoder_config)
        self.generation_config = paper_generation_config(config)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        encoder_outputs: FiberT5EncoderOutput | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        *,  # T5's own arguments, then the video's, by keyword only: a positional call means what it means to T5
        video_features: torch.FloatTensor | None = None,
        video_attention_mask: torch.Tensor | None = None,
        **kwargs,
    ) -> Seq2SeqLMOutput:
        r"""
        T5's forward, with the video and the decoder cross-attending to the joint sequence.

        video_features (`torch.FloatTensor` of shape `(batch_size, frames, video_feature_size)`):
            The clip's features (I3D), zero-padded; required unless `fusion="none"`.
        video_attention_mask (`torch.Tensor` of shape `(batch_size, frames)`, *optional*):
            1 on real frames, 0 on padding; all ones when not given.
        encoder_outputs ([`FiberT5EncoderOutput`], *optional*):
            A previous output of `self.encoder` (as `generate` passes it); its `attention_mask`
            masks the cross-attention.

        Other arguments (`labels`, `decoder_input_ids`, ...) are [`T5ForConditionalGeneration`]'s.
        """
        if encoder_outputs is None:
            encoder_outputs = self.encoder(
                input_ids=input_ids,
                attention_mask=attention_mask,
                video_features=video_features,
                video_attention_mask=video_attention_mask,
                inputs_embeds=inputs_embeds,
            )
        elif not isinstance(encoder_outputs, FiberT5EncoderOutput):
            raise ValueError("`encoder_outputs` must be what `model.encoder(...)` returns, a FiberT5EncoderOutput: its "
                             f"attention_mask masks the text and video. Got {type(encoder_outputs).__name__}.")
        return super().forward(
            attention_mask=encoder_outputs.attention_mask, encoder_outputs=encoder_outputs, **kwargs
        )

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        """Load a FIBER checkpoint, or start one from any T5 checkpoint (`"t5-base"`, `"google/t5-v1_1-base"`, ...).

        This is the whole T5 weight mapping: the T5 parts of this model have the parameter names of
        `T5ForConditionalGeneration`, so a T5 checkpoint's weights load onto them unchanged, and the
        video weights it lacks are initialized by `FiberT5Encoder._init_weights` and logged.
        Keyword arguments that name config fields set them (`fusion="early"`,
        `num_video_layers=2`, ...). A model started from T5 gets the paper's generation settings.
        Weights load from safetensors only: a folder or repo with only a pickled `pytorch_model.bin`
        is an OSError, since unpickling can run code; so is a damaged safetensors file.
        """
        if kwargs.get("use_safetensors") is False:
            raise ValueError(
                "FIBER models load from safetensors only (`use_safetensors` cannot be turned off): a pickled "
                "checkpoint (pytorch_model.bin) can run arbitrary code when it is loaded."
            )
        folder = Path(pretrained_model_name_or_path)
        if folder.is_dir() and kwargs.get("config") is None and not (folder / CONFIG_NAME).is_file():
            # transformers would build a default-sized config and fail on every weight's shape.
            raise OSError(f"{folder} has no {CONFIG_NAME}: it is not a saved model folder.")
        output_loading_info = kwargs.pop("output_loading_info", False)
        kwargs |= {"output_loading_info": True, "use_safetensors": True}
        try:
            model, loading_info = super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        except SafetensorError as error:
            name = pretrained_model_name_or_path
            raise OSError(f"The safetensors weights of {name} cannot be read: {error}") from error
        started_from_t5 = model.config.architectures != [cls.__name__]
        # Video modules are new when the checkpoint is T5's, or when `fusion=` sets another fusion than saved.
        mismatch = weights_mismatch(loading_info, VIDEO_MODULES if started_from_t5 or "fusion" in kwargs else ())
        if mismatch:
            raise OSError(
                f"The weights of {pretrained_model_name_or_path} do not match its config: {mismatch}; the model "
                "would run with random or missing weights"
            )
        if started_from_t5:
            # Another architecture's checkpoint (T5): its generation settings are not FIBER's.
            model.config.architectures = [cls.__name__]
            model.generation_config = paper_generation_config(model.config)
            new_modules = Counter(".".join(key.split(".")[:2]) for key in loading_info["missing_keys"])
            logger.warning(
                f"Started {cls.__name__} (fusion={model.config.fusion!r}) from {pretrained_model_name_or_path}: "
                "its weights fill the T5 parts; new, freshly initialized: "
                + (", ".join(f"{name} ({count} tensors)" for name, count in sorted(new_modules.items())) or "nothing")
            )
        return (model, loading_info) if output_loading_info else model

    def save_pretrained(self, save_directory, *args, **kwargs):
        """`PreTrainedModel.save_pretrained`, with the weights readable as the process's umask allows, like its other
        files.

        safetensors (0.8) writes its files with mode 0600 whatever the umask, while the config, the
        code files and the generation config get 0644 under the usual umask 022: a folder meant to be
        shared would hold weights that only their owner can read.
        """
        super().save_pretrained(save_directory, *args, **kwargs)
        if kwargs.get("is_main_process", True):
            umask = os.umask(0)
            os.umask(umask)
            # The weights of this save: save_pretrained removes the shards of an earlier one.
            for weights in Path(save_directory).glob(f"{SAFE_WEIGHTS_NAME.removesuffix('.safetensors')}*.safetensors"):
                weights.chmod(0o666 & ~umask)

    def fill_blanks(
        self,
        processor: FiberProcessor,
        masked_captions: Sequence[str],
        video_features: Sequence | None = None,
        num_beams: int | None = None,
        only_noun_phrases: bool = True,
        nlp=None,
        return_candidates: bool = False,
        batch_size: int = 32,
    ) -> list[str] | list[tuple[str, list[str]]]:
        """Fill the blank of each masked caption: tokenize, batch, beam-search, extract and choose.

        Args:
            processor ([`FiberProcessor`]): the processor the model was trained with.
            masked_captions: captions with one `_____` each (or one caption).
            video_features: one feature array per caption (frames, size); required unless `fusion="none"`.
            num_beams: beam size; the model's `generation_config.num_beams` (the paper's) when None.
            only_noun_phrases: answer with the first beam that is a noun phrase in the blank (paper
                App. B.2), else the first beam. Needs spaCy (an ImportError names the install command).
            nlp: the spaCy pipeline for the noun-phrase check; `load_spacy_pipeline()` when None.
            return_candidates: also return each example's ranked, deduplicated beam answers.
            batch_size: examples per `generate` call.

        Inputs go to the model's device (`model.to("cuda")` first to use a GPU); on CUDA it runs
        in bfloat16 autocast where the GPU supports it. The model is never moved: it may be in the
        middle of training, placed by Accelerate. It runs in eval mode (dropout off, so the
        answers are deterministic) under `torch.inference_mode`, and is put back in the mode it was
        in. Bad inputs (no caption, a caption without exactly one blank, a feature array per
        caption missing or extra) raise a ValueError before any generation.
        """
        masked_captions = check_masked_captions(masked_captions)
        video_features = None if video_features is None else list(video_features)
        if video_features is not None and len(video_features) != len(masked_captions):
            raise ValueError(f"Got {len(masked_captions)} masked captions but {len(video_features)} video feature "
                             "arrays: give one array per caption.")
        for name, value in (("num_beams", num_beams), ("batch_size", batch_size)):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"`{name}` must be a positive integer, got {value!r}.")
        if only_noun_phrases and nlp is None:
            nlp = load_spacy_pipeline()  # before generating: a missing spaCy fails at once
        candidates = []
        for start in range(0, len(masked_captions), batch_size):
            end = start + batch_size
            features = None if video_features is None else video_features[start:end]
            candidates += self.blank_candidates(
                processor, processor(masked_captions[start:end], video_features=features), num_beams
            )
        if only_noun_phrases:
            chosen = choose_noun_phrases(masked_captions, candidates, nlp)
        else:
            chosen = [ranked[0] for ranked in candidates]
        return list(zip(chosen, candidates)) if return_candidates else chosen

    def blank_candidates(self, processor: FiberProcessor, inputs, num_beams: int | None = None) -> list[list[str]]:
        """Each example's ranked, deduplicated beam answers for a batch that `processor` made
        (`processor(masked_captions, video_features=...)`), generated as `fill_blanks` generates them: for inputs
        made elsewhere, such as in a data loader's worker process (`fiberbench predict`).

        It runs in eval mode, put back as it was, under `torch.inference_mode`, in bfloat16 autocast on
        GPUs that support it; the inputs go to the model's device.
        """
        on_bf16_gpu = self.device.type == "cuda" and torch.cuda.is_bf16_supported()
        autocast = torch.autocast("cuda", dtype=torch.bfloat16) if on_bf16_gpu else contextlib.nullcontext()
        was_training = self.training
        self.eval()
        try:
            with torch.inference_mode(), autocast:
                return generate_candidates(self, processor, inputs, num_beams)
        finally:
            self.train(was_training)


__all__ = ["FiberT5Encoder", "FiberT5EncoderOutput", "FiberT5ForConditionalGeneration"]
