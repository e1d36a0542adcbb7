"""FiberProcessor: the one place that turns FIBER examples into model inputs and generated ids into answers."""

from collections.abc import Sequence

import numpy as np
import torch
from transformers import BatchFeature, ProcessorMixin

# The blank of a masked caption, as the release writes it (`fiberbench.data.fiber.release.BLANK`, which the data tools
# read without loading torch): the model and its decoding look for this one, in this file that ships with the model.
BLANK = "_____"
BLANK_TOKEN = "<extra_id_0>"
ANSWER_END_TOKEN = "<extra_id_1>"

# VaTeX I3D features: one 1024-d vector per 8 consecutive frames of 25 fps video.
FPS = 25
FRAMES_PER_FEATURE = 8


def check_masked_captions(masked_captions: str | Sequence[str]) -> list[str]:
    """The captions as a list (one may be given alone); a ValueError names the first without exactly one blank."""
    masked_captions = [masked_captions] if isinstance(masked_captions, str) else list(masked_captions)
    if not masked_captions:
        raise ValueError("Got no masked captions: give at least one.")
    for index, caption in enumerate(masked_captions):
        if not isinstance(caption, str):
            raise ValueError(f"Masked caption {index} must be a string, got {type(caption).__name__}: {caption!r}")
        if caption.count(BLANK) != 1:
            raise ValueError(
                f"Masked caption {index} must contain exactly one {BLANK!r}, found {caption.count(BLANK)}: {caption!r}"
            )
    return masked_captions


class FiberProcessor(ProcessorMixin):
    r"""
    A T5 tokenizer plus FIBER's input format, shared by training and inference.

    The blank `_____` of a masked caption becomes T5's first sentinel `<extra_id_0>`; the target of
    a label is `<extra_id_0> {label} <extra_id_1>` (then `</s>`), T5's span-corruption format, so
    a pretrained T5 already knows the task (paper §4.1). Video features of different lengths are
    padded with zeros and a mask.

    Args:
        tokenizer ([`PreTrainedTokenizerBase`]):
            A T5-style tokenizer with the sentinels `<extra_id_0>` and `<extra_id_1>`.
        single_feature (`bool`, *optional*, defaults to `False`):
            Keep only the feature at `feature_second` of each clip (the paper's "1f" variants).
        feature_second (`float`, *optional*, defaults to 3.0):
            The second of the clip whose feature `single_feature` keeps.
    """

    def __init__(self, tokenizer, single_feature: bool = False, feature_second: float = 3.0):
        if feature_second < 0:
            raise ValueError(f"`feature_second` must be >= 0, got {feature_second}.")
        self.single_feature = single_feature
        self.feature_second = feature_second
        super().__init__(tokenizer)
        missing = [
            token
            for token in (BLANK_TOKEN, ANSWER_END_TOKEN)
            if tokenizer.convert_tokens_to_ids(token) in (None, tokenizer.unk_token_id)
        ]
        if missing:
            raise ValueError(f"The tokenizer has no {' or '.join(missing)}: FIBER needs a T5-style tokenizer.")

    @property
    def blank_token_id(self) -> int:
        """Id of `<extra_id_0>`, which stands for the blank in inputs and opens the answer in outputs."""
        return self.tokenizer.convert_tokens_to_ids(BLANK_TOKEN)

    @property
    def answer_end_token_id(self) -> int:
        """Id of `<extra_id_1>`, which closes the answer in outputs."""
        return self.tokenizer.convert_tokens_to_ids(ANSWER_END_TOKEN)

    @property
    def feature_index(self) -> int:
        """Index of the feature that covers `feature_second` (3 s: frames 72-79, feature 9)."""
        return int(self.feature_second * FPS // FRAMES_PER_FEATURE)

    def __call__(
        self,
        masked_captions: str | Sequence[str],
        video_features: Sequence | None = None,
        labels: str | Sequence[str] | None = None,
    ) -> BatchFeature:
        """Tokenize a batch, with optional video features and labels.

        Args:
            masked_captions: captions with exactly one `_____` each.
            video_features: one array per caption, shaped (frames, size) or (1, frames, size)
                as in the release's `.npy` files.
            labels: the answers to learn, one per caption.

        Returns:
            A `BatchFeature` of tensors: `input_ids` and `attention_mask` (batch, tokens); with
            video, `video_features` (batch, frames, size) and `video_attention_mask` (batch,
            frames); with labels, `labels` (batch, target tokens) with -100 on padding.
        """
        masked_captions = check_masked_captions(masked_captions)
        texts = [caption.replace(BLANK, BLANK_TOKEN) for caption in masked_captions]
        batch = dict(self.tokenizer(texts, padding=True, return_tensors="pt"))
        if video_features is not None:
            batch.update(self.pad_video_features(video_features, expected=len(texts)))
        if labels is not None:
            labels = [labels] if isinstance(labels, str) else list(labels)
            if len(labels) != len(texts):
                raise ValueError(f"Got {len(texts)} masked captions but {len(labels)} labels.")
            targets = [f"{BLANK_TOKEN} {label.strip()} {ANSWER_END_TOKEN}" for label in labels]
            encoded = self.tokenizer(targets, padding=True, return_tensors="pt")
            batch["labels"] = encoded.input_ids.masked_fill(encoded.attention_mask == 0, -100)
        return BatchFeature(batch)

    def pad_video_features(self, video_features: Sequence, expected: int) -> dict[str, torch.Tensor]:
        """Stack one feature array per caption into (batch, frames, size) zero-padded features and their mask."""
        if len(video_features) != expected:
            raise ValueError(f"Got {expected} masked captions but {len(video_features)} video feature arrays.")
        clips = []
        for index, features in enumerate(video_features):
            try:
                array = np.asarray(features, dtype=np.float32)
            except (TypeError, ValueError) as error:
                raise ValueError(f"Video features {index} are not an array of numbers: {error}") from error
            # Arrays read from Arrow (`with_format("numpy")`) are read-only, which torch warns about on every
            # first use: copy those; the batch below is a copy anyway.
            clip = torch.from_numpy(array if array.flags.writeable else array.copy())
            if clip.ndim == 3 and clip.shape[0] == 1:
                clip = clip[0]
            if clip.ndim != 2 or clip.shape[0] == 0:
                raise ValueError(
                    f"Video features {index} must be shaped (frames, size) or (1, frames, size) with "
                    f"frames >= 1, got {tuple(clip.shape)}."
                )
            if clips and clip.shape[1] != clips[0].shape[1]:
                raise ValueError(
                    f"Video features {index} have {clip.shape[1]} values per frame, "
                    f"features 0 have {clips[0].shape[1]}."
                )
            clips.append(clip)
        lengths = torch.tensor([clip.shape[0] for clip in clips])
        features = torch.nn.utils.rnn.pad_sequence(clips, batch_first=True)
        # One check of the whole batch (padding is zeros), in NumPy: torch.isfinite per clip took a
        # third of the collator's time, NumPy's check of the batch takes 1/20 of torch's.
        finite = np.isfinite(features.numpy()).all(axis=(1, 2))
        if not finite.all():
            raise ValueError(f"Video features {int(np.flatnonzero(~finite)[0])} hold NaN or infinite values.")
        if self.single_feature:
            # A clip shorter than `feature_second` keeps its last feature.
            features = features[torch.arange(len(clips)), lengths.clamp(max=self.feature_index + 1) - 1][:, None]
            lengths = torch.ones_like(lengths)
        mask = (torch.arange(features.shape[1])[None, :] < lengths[:, None]).long()
        return {"video_features": features, "video_attention_mask": mask}

    def decode_answers(self, sequences: torch.LongTensor) -> list[str]:
        """The answer in each generated sequence: the text between `<extra_id_0>` and `<extra_id_1>`.

        The sequence is cut at its first `</s>` (beam search pads finished beams with `</s>`). A
        missing `<extra_id_0>` means the answer starts at the beginning; a missing `<extra_id_1>`
        means it runs to the end.
        """
        answers = []
        for ids in sequences.tolist():
            if self.tokenizer.eos_token_id in ids:
                ids = ids[: ids.index(self.tokenizer.eos_token_id)]
            if self.blank_token_id in ids:
                ids = ids[ids.index(self.blank_token_id) + 1 :]
            if self.answer_end_token_id in ids:
                ids = ids[: ids.index(self.answer_end_token_id)]
            answers.append(self.tokenizer.decode(ids, skip_special_tokens=True).strip())
        return answers


__all__ = ["BLANK", "FiberProcessor", "check_masked_captions"]
