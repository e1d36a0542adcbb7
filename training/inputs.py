"""Data for training: the FIBER splits (the bundled sample or a Hub/local dataset) and batches of model inputs."""

from collections.abc import Sequence
from pathlib import Path

import datasets
import numpy as np
import torch
from torch.utils.data import DataLoader

import fiberbench.data

VIDEO_COLUMN = "video_features"


def default_config_name(fusion: str) -> str:
    """The dataset config a model needs: video features for a fusion model, text alone otherwise."""
    return "text" if fusion == "none" else "i3d"


def load_splits(dataset_name: str | None, config_name: str, fusion: str) -> datasets.DatasetDict:
    """The dataset's splits; the bundled sample when `dataset_name` is None.

    Fails at once (before any model is built) when a fusion model is asked for but the config
    has no video features, naming the dataset and config and the config to use instead.
    """
    if dataset_name is None:
        splits = fiberbench.data.load_sample(config_name)
        described = f"the bundled sample (config {config_name!r})"
    else:
        # A local folder by its absolute path: a bare name may return an older cached copy.
        location = str(Path(dataset_name).resolve()) if Path(dataset_name).is_dir() else dataset_name
        splits = datasets.load_dataset(location, config_name)
        described = f"dataset {dataset_name!r} (config {config_name!r})"
    for split in splits.values():
        if fusion != "none" and VIDEO_COLUMN not in split.column_names:
            raise ValueError(
                f"--fusion {fusion} needs video features, but {described} has no {VIDEO_COLUMN!r} column "
                f"(columns: {', '.join(split.column_names)}). Use --dataset_config_name i3d, or --fusion none."
            )
    return splits


class FiberCollator:
    """Turns a batch of row indices of one split into a batch, reading the video features in one slice.

    The data loader iterates over row indices and this collator reads the whole batch's features
    at once, straight from Arrow: batched reads are about 10x faster than row by row, and
    skipping datasets' NumPy formatting makes them about 2.5x faster again, so the loader keeps
    well ahead of even the tiny demo model's training step (bench/train.py). The text columns
    are small and read once.

    Args:
        dataset: the split.
        with_video: whether to read the split's `video_features` (fusion models).
        processor: the model's `FiberProcessor`: batches are then model inputs with `labels`
            (training); without one they are the raw `masked_caption`, `label` and
            `video_features` lists (evaluation, which calls the model's `fill_blanks`).
    """

    def __init__(self, dataset: datasets.Dataset, with_video: bool, processor=None):
        self.processor = processor
        self.masked_captions = list(dataset["masked_caption"])
        self.labels = list(dataset["label"])
        self.videos = dataset.select_columns([VIDEO_COLUMN]).with_format("arrow") if with_video else None

    def __call__(self, indices: Sequence[int]) -> dict:
        """The rows `indices`, plus `index` (batch,) to find each row again after gathering across processes."""
        indices = list(indices)
        batch = {
            "masked_caption": [self.masked_captions[index] for index in indices],
            "label": [self.labels[index] for index in indices],
        }
        if self.videos is not None:
            batch[VIDEO_COLUMN] = self.read_video_features(indices)
        if self.processor is not None:
            batch = dict(
                self.processor(batch["masked_caption"], video_features=batch.get(VIDEO_COLUMN), labels=batch["label"])
            )
        batch["index"] = torch.tensor(indices)
        return batch

    def read_video_features(self, indices: list[int]) -> list[np.ndarray]:
        """Each row's features, (frames, feature size) float32, from one Arrow read.

        An Array2D column of shape (None, size) is stored as a list (frames) of lists (features):
        flattening it twice gives every float of the batch in one buffer, cut back into clips
        by the frame counts.
        """
        clips = self.videos[indices].column(VIDEO_COLUMN).combine_chunks().storage
        frame_counts = clips.value_lengths().to_numpy()
        frames = clips.flatten().flatten().to_numpy(zero_copy_only=False, writable=True)
        frames = frames.reshape(int(frame_counts.sum()), -1)
        return np.split(frames, np.cumsum(frame_counts)[:-1])


def make_dataloader(
    dataset: datasets.Dataset, with_video: bool, batch_size: int, shuffle: bool, seed: int, processor=None
) -> DataLoader:
    """A data loader over the split's row indices, with batches made by `FiberCollator`.

    The loader has its own seeded generator, so starting an iteration draws nothing from the
    global torch RNG: dropout then sees the same random numbers in a run resumed from a
    checkpoint as in an uninterrupted one.
    """
    return DataLoader(
        range(len(dataset)),
        batch_size=batch_size,
        shuffle=shuffle,
        collate_fn=FiberCollator(dataset, with_video, processor),
        generator=torch.Generator().manual_seed(seed),
    )
