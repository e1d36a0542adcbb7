"""Decoding and encoding overlapped: data loader workers decode clips and run the processor while the model encodes.

`DecodedClips` is a PyTorch dataset of clips whose items are their model inputs (the frames
sampled with PyAV by `fiberbench.videos.sample_frames`, then `ClipPreparer`); a
`DataLoader` over it with workers keeps batches of clips coming while `encode_clips` runs the
encoder on the previous one and splits its output back into each clip's (T, D) features.
A video that fails while decoding is an item carrying its error, raised in the main process as one
line (a worker's exception would come wrapped in its traceback).
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from fiberbench.errors import DataError
from fiberbench.videos import FrameSampling, sample_frames

from fiberbench.data.features.clips import Clip
from fiberbench.data.features.encoders import ClipPreparer, Encoder


@dataclass
class PreparedClips:
    """A batch of clips' model inputs: `inputs` hold every clip's units (frames or windows) one after another."""

    names: list[str]
    num_frames: list[int]  # frames sampled per clip
    inputs: dict[str, torch.Tensor]
    error: str | None = None  # a video that could not be decoded: the batch is not encoded

    def pin_memory(self) -> "PreparedClips":
        """Page-locked inputs, for fast copies to a GPU (what a DataLoader with `pin_memory` calls)."""
        self.inputs = {name: value.pin_memory() for name, value in self.inputs.items()}
        return self


class DecodedClips(torch.utils.data.Dataset):
    """`clips` as their model inputs: each clip's frames sampled (`sampling`) and prepared (`preparer`)."""

    def __init__(self, clips: list[Clip], sampling: FrameSampling, preparer: ClipPreparer):
        self.clips = clips
        self.sampling = sampling
        self.preparer = preparer

    def __len__(self) -> int:
        return len(self.clips)

    def __getitem__(self, index: int) -> PreparedClips:
        clip = self.clips[index]
        try:
            frames = sample_frames(clip.video, self.sampling).frames
        except DataError as error:
            return PreparedClips([clip.name], [0], {}, error=f"{error} (the video of clip {clip.name})")
        return PreparedClips([clip.name], [len(frames)], self.preparer(frames))


def collate(items: list[PreparedClips]) -> PreparedClips:
    """One batch of clips: their inputs concatenated along the units; the first error, if any, instead."""
    failed = next((item for item in items if item.error is not None), None)
    if failed is not None:
        return failed
    return PreparedClips(
        [name for item in items for name in item.names],
        [count for item in items for count in item.num_frames],
        {name: torch.cat([item.inputs[name] for item in items]) for name in items[0].inputs},
    )


def make_loader(
    clips: list[Clip],
    sampling: FrameSampling,
    preparer: ClipPreparer,
    *,
    batch_size: int,
    num_workers: int,
    pin_memory: bool = False,
) -> torch.utils.data.DataLoader:
    """Batches of `batch_size` clips in order, decoded ahead by `num_workers` processes (0: in this one)."""
    return torch.utils.data.DataLoader(
        DecodedClips(clips, sampling, preparer),
        batch_size=batch_size,
        collate_fn=collate,
        num_workers=num_workers,
        pin_memory=pin_memory,
        prefetch_factor=4 if num_workers > 0 else None,
    )


def clip_features(encoder: Encoder, batch: PreparedClips) -> Iterator[tuple[str, np.ndarray]]:
    """Encode a batch: each clip's name and features, float32 of shape (T, D).

    Raises:
        DataError: the batch holds a video that could not be decoded.
    """
    if batch.error is not None:
        raise DataError(batch.error)
    spec = encoder.spec
    units = encoder(batch.inputs).cpu()  # (units, steps per unit, D)
    start = 0
    for name, num_frames in zip(batch.names, batch.num_frames):
        count = spec.units(num_frames)
        steps = units[start : start + count].flatten(0, 1)[: spec.steps(num_frames)]
        start += count
        yield name, steps.numpy()


def encode_clips(
    encoder: Encoder, batches, write: Callable[[str, np.ndarray], None], progress: Callable[[int], None]
) -> int:
    """Encode every batch and `write` each clip's features as it comes; returns how many clips were written."""
    written = 0
    for batch in batches:
        for name, features in clip_features(encoder, batch):
            write(name, features)
            written += 1
        progress(len(batch.names))
    return written
