"""The encoders `fiberbench extract-features` runs: image encoders applied to each frame, video encoders to windows.

`ClipPreparer` turns frames into inputs in a `DataLoader`'s workers (`make_loader`) while `encode_clips` runs the
`Encoder`; a video that fails while decoding is a batch carrying its error, raised in the main process as one line.
"""

import functools
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import MODEL_MAPPING, AutoImageProcessor, AutoModel, AutoVideoProcessor

from fiberbench.errors import DataError, UsageError
from fiberbench.outputs import atomic_path
from fiberbench.videos import Clip, FrameSampling, sample_frames

POOLINGS = {
    "pooler_output": "the model's pooled output",
    "cls": "the first token (class token) of the last hidden state",
    "mean": "the mean of the last hidden state's tokens",
}
IMAGE, VIDEO = "image", "video"
# The frame the encoder is first run on (`Encoder.probe`): any size, the processor resizes it.
PROBE_FRAME = np.zeros((64, 64, 3), dtype=np.uint8)


@dataclass(frozen=True)
class EncoderSpec:
    """How an encoder is run, read from its config before any weights are loaded (`encoder_spec`)."""

    kind: str  # IMAGE (one feature per frame) or VIDEO (one per temporal patch of a window)
    pooling: str  # which output becomes the feature (`POOLINGS`)
    dual: bool = False  # an image-text model: frames go through `get_image_features`, not `forward`
    input_name: str = "pixel_values"  # the forward argument of the pixels (V-JEPA 2's: `pixel_values_videos`)
    window_frames: int | None = None  # video encoders: the frames of one window
    tubelet_size: int | None = None  # video encoders: the frames of one temporal patch

    def units(self, num_frames: int) -> int:
        """How many inputs (frames, or windows) a clip of `num_frames` sampled frames gives the model."""
        return num_frames if self.kind == IMAGE else math.ceil(num_frames / self.window_frames)

    def steps(self, num_frames: int) -> int:
        """T, how many features a clip of `num_frames` sampled frames gets."""
        return num_frames if self.kind == IMAGE else math.ceil(num_frames / self.tubelet_size)

    def describe(self) -> dict:
        """The `output` section of `features.json`: which output one feature is, in words and fields."""
        if self.kind == IMAGE:
            through = "get_image_features" if self.dual else "forward"
            description = f"{POOLINGS[self.pooling]} ({self.pooling} of {through}) of each sampled frame"
            return {"pooling": self.pooling, "description": description}
        description = (f"{POOLINGS[self.pooling]} of each temporal patch ({self.tubelet_size} frames) of windows of "
                       f"{self.window_frames} sampled frames (the last window filled up with its last frame)")
        return {"pooling": self.pooling, "description": description, "window_frames": self.window_frames,
                "tubelet_size": self.tubelet_size}


def encoder_spec(config, pooling: str | None, name: str) -> EncoderSpec:
    """How the model of `config` (named `name` in messages) is run, with --pooling (None: its kind's default); a
    `UsageError` for a model without a vision tower read here, or a pooling it does not have."""
    tubelet_size = getattr(config, "tubelet_size", None)
    model_class = MODEL_MAPPING[type(config)] if type(config) in MODEL_MAPPING else None
    forward = inspect.signature(model_class.forward).parameters if model_class is not None else {}
    if isinstance(tubelet_size, int) and not isinstance(tubelet_size, bool):
        input_name = next((name for name in ("pixel_values_videos", "pixel_values") if name in forward), None)
        window = getattr(config, "num_frames", None) or getattr(config, "frames_per_clip", None)
        if input_name is None or not isinstance(window, int):
            raise UsageError(f"--model_name_or_path {name}: a {config.model_type!r} model of tubelets, but not one "
                             "fiberbench knows how to read (no pixel input or number of frames)")
        if pooling not in (None, "mean"):
            raise UsageError(f"--pooling {pooling}: a video encoder's features are the mean of each temporal patch "
                             "(--pooling mean)")
        return EncoderSpec(VIDEO, "mean", input_name=input_name, window_frames=window, tubelet_size=tubelet_size)
    dual = getattr(config, "vision_config", None) is not None and hasattr(model_class, "get_image_features")
    if not dual and "pixel_values" not in forward:
        raise UsageError(f"--model_name_or_path {name}: a {config.model_type!r} model has no vision tower that reads "
                         "frames: give an image encoder (CLIP, SigLIP, SigLIP 2, DINOv2, ...) or a video encoder "
                         "(VideoMAE, V-JEPA 2)")
    return EncoderSpec(IMAGE, pooling or "pooler_output", dual=dual)


@dataclass(frozen=True)
class ClipPreparer:
    """Turns a clip's sampled frames into the encoder's inputs with its processor: what data loader workers run."""

    spec: EncoderSpec
    processor: object

    @classmethod
    def load(cls, spec: EncoderSpec, name: str, loading: dict) -> "ClipPreparer":
        """The processor of model `name` (V-JEPA 2's is a video processor); a `DataError` when it cannot be loaded
        (none saved with the model, or one that needs torchvision)."""
        auto_class = AutoVideoProcessor if spec.input_name == "pixel_values_videos" else AutoImageProcessor
        try:
            processor = auto_class.from_pretrained(name, **loading)
        except (OSError, ValueError, ImportError) as error:
            raise DataError(f"--model_name_or_path {name}: cannot load its {auto_class.__name__.removeprefix('Auto')} "
                            f"({' '.join(str(error).split())})") from error
        return cls(spec, processor)

    def __call__(self, frames: list[np.ndarray]) -> dict[str, torch.Tensor]:
        """Each unit's features, float32 (units, steps per unit, D): a step per frame, or per temporal patch."""
        if self.spec.kind == IMAGE:
            return dict(self.processor(images=frames, return_tensors="pt"))
        window = self.spec.window_frames
        filled = frames + [frames[-1]] * (self.spec.units(len(frames)) * window - len(frames))
        windows = [filled[start : start + window] for start in range(0, len(filled), window)]
        if self.spec.input_name == "pixel_values_videos":  # a video processor: the frames are already sampled
            return dict(self.processor(videos=windows, do_sample_frames=False, return_tensors="pt"))
        return dict(self.processor(windows, return_tensors="pt"))


class Encoder:
    """The model of a `ClipPreparer`'s inputs, on its device, giving each unit's features."""

    def __init__(self, spec: EncoderSpec, model):
        self.spec, self.model = spec, model
        # V-JEPA 2 also runs its predictor unless told not to: the encoder's output is all that is read.
        self.extra = {"skip_predictor": True} if "skip_predictor" in inspect.signature(model.forward).parameters else {}

    @classmethod
    def load(cls, spec: EncoderSpec, name: str, loading: dict, device: torch.device, dtype: torch.dtype) -> "Encoder":
        """The model `name` from its safetensors weights (never a pickle), on `device` in `dtype`, in eval mode."""
        try:
            model = AutoModel.from_pretrained(name, dtype=dtype, use_safetensors=True, **loading)
        except (OSError, ValueError, RuntimeError) as error:
            problem = " ".join(str(error).split())
            raise DataError(f"--model_name_or_path {name}: cannot be loaded ({problem})") from error
        return cls(spec, model.to(device).eval())

    def __call__(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Each unit's features, float32 of shape (units, steps per unit, D): one step per frame, or per temporal
        patch of a window."""
        return self._pool(self._run(inputs))

    @torch.inference_mode()
    def _run(self, inputs: dict[str, torch.Tensor]):
        """The model's outputs for a batch of inputs, moved to its device (floats in its dtype)."""
        device, dtype = self.model.device, self.model.dtype
        inputs = {name: value.to(device, dtype=dtype if value.is_floating_point() else None, non_blocking=True)
                  for name, value in inputs.items()}
        if self.spec.kind == VIDEO:
            return self.model(**inputs, **self.extra)
        return self.model.get_image_features(**inputs) if self.spec.dual else self.model(**inputs)

    def _pool(self, outputs) -> torch.Tensor:
        if self.spec.kind == VIDEO:
            hidden = outputs.last_hidden_state  # (windows, steps x patches, D)
            steps = self.spec.window_frames // self.spec.tubelet_size
            return hidden.unflatten(1, (steps, -1)).mean(dim=2).float()
        if self.spec.pooling == "pooler_output":
            return outputs.pooler_output[:, None, :].float()
        hidden = outputs.last_hidden_state
        return (hidden[:, :1] if self.spec.pooling == "cls" else hidden.mean(dim=1, keepdim=True)).float()

    def probe(self, preparer: ClipPreparer, name: str) -> int:
        """D, from a run of the model on a black clip; a `UsageError` when it has not the output chosen (no
        `pooler_output`, no class token for `cls`, last hidden states that do not split into temporal patches)."""
        spec = self.spec
        inputs = preparer([PROBE_FRAME] * (spec.window_frames or 1))
        try:
            outputs = self._run(inputs)
            if spec.kind == IMAGE and spec.pooling == "cls" and not self._has_class_token(inputs, outputs):
                raise UsageError(f"--pooling cls: {name} has no class token (its last hidden state is one token per "
                                 "patch); use --pooling pooler_output or mean")
            features = self._pool(outputs)
        except (AttributeError, TypeError, RuntimeError) as error:
            output = "get_image_features" if spec.dual else "forward"
            raise UsageError(f"--model_name_or_path {name}: its {output} gives no {spec.pooling} to take as features "
                             f"({type(error).__name__}: {' '.join(str(error).split())})") from error
        return features.shape[-1]

    def _has_class_token(self, inputs: dict, outputs) -> bool:
        """Whether the last hidden state has more tokens than the frame has patches (a class token comes first)."""
        config = getattr(self.model.config, "vision_config", None) or self.model.config
        pixels, patch = inputs["pixel_values"], config.patch_size
        # (frames, channels, height, width), or SigLIP 2's (frames, patches, values of a patch).
        patches = pixels.shape[1] if pixels.ndim == 3 else (pixels.shape[-2] // patch) * (pixels.shape[-1] // patch)
        return outputs.last_hidden_state.shape[1] > patches


@dataclass
class PreparedClips:
    """A batch of clips' model inputs: `inputs` hold every clip's units (frames or windows) one after another."""

    names: list[str]
    num_frames: list[int]  # frames sampled per clip
    inputs: dict[str, torch.Tensor]
    error: str | None = None  # a video that could not be decoded: the batch is not encoded

    def pin_memory(self) -> "PreparedClips":  # what a DataLoader with `pin_memory` calls: for fast copies to a GPU
        self.inputs = {name: value.pin_memory() for name, value in self.inputs.items()}
        return self


def prepare_clips(clips: list[Clip], sampling: FrameSampling, preparer: ClipPreparer) -> PreparedClips:
    """One batch (what a data loader's worker runs): each clip's frames sampled (`sampling`) and prepared, the inputs
    concatenated along the units; the error of the first video that cannot be decoded instead."""
    names, num_frames, inputs = [], [], []
    for clip in clips:
        try:
            frames = sample_frames(clip.video, sampling).frames
        except DataError as error:
            return PreparedClips([clip.name], [0], {}, error=f"{error} (the video of clip {clip.name})")
        names.append(clip.name)
        num_frames.append(len(frames))
        inputs.append(preparer(frames))
    return PreparedClips(names, num_frames, {name: torch.cat([item[name] for item in inputs]) for name in inputs[0]})


def make_loader(clips: list[Clip], sampling: FrameSampling, preparer: ClipPreparer, *, batch_size: int,
                num_workers: int, pin_memory: bool = False) -> torch.utils.data.DataLoader:
    """Batches of `batch_size` clips in order, decoded ahead by `num_workers` processes (0: in this one)."""
    prepare = functools.partial(prepare_clips, sampling=sampling, preparer=preparer)
    return torch.utils.data.DataLoader(clips, batch_size=batch_size, collate_fn=prepare, num_workers=num_workers,
                                       pin_memory=pin_memory, prefetch_factor=4 if num_workers > 0 else None)


def encode_clips(encoder: Encoder, batches, folder: Path | None, progress: Callable[[int], None]) -> int:
    """Encode every batch, writing each clip's features as it comes into `folder` (None: nowhere) as `{name}.npy`,
    float32 (1, T, D) like VaTeX's I3D files, atomically; returns how many clips were encoded."""
    encoded, spec = 0, encoder.spec
    for batch in batches:
        if batch.error is not None:
            raise DataError(batch.error)
        units = encoder(batch.inputs).cpu()  # (units, steps per unit, D)
        for name, num_frames in zip(batch.names, batch.num_frames):
            count = spec.units(num_frames)
            features, units = units[:count].flatten(0, 1)[: spec.steps(num_frames)], units[count:]
            if folder is not None:
                with atomic_path(folder / f"{name}.npy") as temporary, open(temporary, "wb") as file:
                    np.save(file, features.numpy()[None].astype(np.float32, copy=False), allow_pickle=False)
            encoded += 1
        progress(len(batch.names))
    return encoded
