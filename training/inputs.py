"""Data for training: the FIBER splits, examples read a batch at a time, the collator, and the data loaders.

The same two pieces feed `training/train.py` and `Seq2SeqTrainer` (`fiberbench.training.trainer`):
`FiberExamples` (a split as a PyTorch dataset whose `__getitems__` reads a whole batch of video
features in one Arrow slice) and `FiberDataCollator` (examples to model inputs with the model's
`FiberProcessor`). Both are picklable, so DataLoader worker processes can read and tokenize
while the training process runs the step.
"""

import multiprocessing
from collections.abc import Iterator, Sequence

import datasets
import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler

import fiberbench.data
from fiberbench.data.fiber.features_info import I3D_CONFIG
from fiberbench.errors import DataError

VIDEO_COLUMN = "video_features"
TEXT_COLUMNS = ("masked_caption", "label")
# Length-grouped batches (--group_by_length) are sorted within windows of this many batches, so
# that batches still come in random order and hold different examples every epoch.
BATCHES_PER_LENGTH_GROUP = 50


def default_config_name(fusion: str, video_features_name: str | None = None) -> str:
    """The dataset config a model needs: text alone, or for a fusion model its video features (VaTeX's I3D, unless
    a FIBER checkpoint says it reads others: `video_features_name`)."""
    if fusion == "none":
        return "text"
    return video_features_name or I3D_CONFIG


def video_feature_size(splits: datasets.DatasetDict) -> int:
    """D, the size of each vector of the splits' `video_features` (an Array2D of shape (None, D))."""
    return next(iter(splits.values())).features[VIDEO_COLUMN].shape[1]


def load_splits(dataset_name: str | None, config_name: str, fusion: str) -> datasets.DatasetDict:
    """The dataset's splits (`fiberbench.data.load_fiber`), checked for the columns the run needs.

    Fails at once (before any model is built) with a `DataError` naming the dataset when a split
    lacks a column the run needs (the video features of a fusion model).
    """
    splits = fiberbench.data.load_fiber(dataset_name, config_name)
    described = f"{dataset_name or 'the bundled sample'} (config {config_name!r})"
    for name, split in splits.items():
        missing = [column for column in TEXT_COLUMNS if column not in split.column_names]
        if fusion != "none" and VIDEO_COLUMN not in split.column_names:
            raise DataError(
                f"--fusion {fusion} needs video features, but {described} has no {VIDEO_COLUMN!r} column "
                f"(columns: {', '.join(split.column_names)}). Use --dataset_config_name i3d, or --fusion none."
            )
        if missing:
            raise DataError(f"{described}, split {name}: no {' or '.join(missing)} column (a FIBER dataset?).")
    return splits


class FiberExamples(torch.utils.data.Dataset):
    """A FIBER split as a PyTorch dataset whose examples are read a batch at a time.

    `DataLoader` (and so `Seq2SeqTrainer`) hands `__getitems__` a whole batch of indices: the
    batch's video features come from one Arrow read, straight from the memory-mapped table.
    Batched reads are about 10x faster than row by row, and skipping datasets' NumPy formatting
    about 2.5x faster again (bench/train.py); the text columns are small and read once.

    Args:
        split: the split (`masked_caption`, `label` and, with `with_video`, `video_features`).
        with_video: whether examples carry `video_features`, (frames, size) float32 arrays.

    Each example is a dict with `index` (its row, to put gathered predictions back in order),
    `masked_caption`, `label` and, with video, `video_features`.
    """

    def __init__(self, split: datasets.Dataset, with_video: bool):
        self.masked_captions = list(split["masked_caption"])
        self.labels = list(split["label"])
        self.videos = split.select_columns([VIDEO_COLUMN]).with_format("arrow") if with_video else None

    def __len__(self) -> int:
        return len(self.masked_captions)

    def __getitem__(self, index: int) -> dict:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[dict]:
        indices = [int(index) for index in indices]
        examples = [
            {"index": index, "masked_caption": self.masked_captions[index], "label": self.labels[index]}
            for index in indices
        ]
        if self.videos is not None:
            for example, clip in zip(examples, self.read_video_features(indices)):
                example[VIDEO_COLUMN] = clip
        return examples

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

    def lengths(self, processor) -> list[int]:
        """Each example's input length for `processor`: caption tokens plus the video features it keeps."""
        text = processor(self.masked_captions)["attention_mask"].sum(dim=1).tolist()
        if self.videos is None:
            return text
        if processor.single_feature:
            return [length + 1 for length in text]
        frames = self.videos.data.column(VIDEO_COLUMN).combine_chunks().storage.value_lengths().to_numpy()
        return [length + int(count) for length, count in zip(text, frames)]


class FiberDataCollator:
    """Turns a list of examples (from `FiberExamples`) into a batch.

    Args:
        processor: the model's `FiberProcessor`: batches are then exactly the model's inputs,
            `labels` included (training, and `Seq2SeqTrainer`). Without one they are the raw
            `masked_caption`, `label` and `video_features` lists plus `index` (batch,)
            (evaluation, which calls the model's `fill_blanks`).
    """

    def __init__(self, processor=None):
        self.processor = processor

    def __call__(self, examples: list[dict]) -> dict:
        video_features = [example[VIDEO_COLUMN] for example in examples] if VIDEO_COLUMN in examples[0] else None
        captions = [example["masked_caption"] for example in examples]
        labels = [example["label"] for example in examples]
        if self.processor is not None:
            return dict(self.processor(captions, video_features=video_features, labels=labels))
        batch = {"masked_caption": captions, "label": labels, "index": torch.tensor([e["index"] for e in examples])}
        if video_features is not None:
            batch[VIDEO_COLUMN] = video_features
        return batch


class LengthGroupedSampler(Sampler[int]):
    """Random order, with examples of similar length next to each other (for --group_by_length).

    Each epoch draws a permutation from `seed` and the epoch (the same on every process and after
    a resume), cuts it into windows of `BATCHES_PER_LENGTH_GROUP` batches and sorts each window
    by length, longest first: batches then need little padding and still differ between epochs.
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, seed: int):
        self.lengths = torch.as_tensor(lengths)
        self.window = batch_size * BATCHES_PER_LENGTH_GROUP
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self) -> Iterator[int]:
        order = torch.randperm(len(self.lengths), generator=torch.Generator().manual_seed(self.seed + self.epoch))
        for window in order.split(self.window):
            yield from window[torch.argsort(self.lengths[window], descending=True, stable=True)].tolist()


def make_dataloader(
    examples: FiberExamples,
    *,
    batch_size: int,
    shuffle: bool,
    seed: int,
    processor=None,
    num_workers: int = 0,
    pin_memory: bool = False,
    lengths: Sequence[int] | None = None,
    worker_context: multiprocessing.context.BaseContext | None = None,
) -> DataLoader:
    """A data loader of `examples` batched by `FiberDataCollator(processor)`.

    Args:
        shuffle: a new random order each epoch (`set_epoch`), drawn from `seed`.
        num_workers: processes that read and collate batches ahead of the step (kept across
            epochs, each with 4 batches in flight); 0 reads in the calling process.
        pin_memory: page-locked batches, for fast copies to a GPU.
        lengths: with `shuffle`, group examples of similar length (`LengthGroupedSampler`).
        worker_context: how the workers start (None: forked, the platform's default; see `launch.forkserver_context`).

    The loader has its own seeded generator, so starting an iteration draws nothing from the
    global torch RNG: dropout then sees the same random numbers in a run resumed from a
    checkpoint as in an uninterrupted one, with or without workers.
    """
    if lengths is not None and not shuffle:
        raise ValueError("Length-grouped batches are for training (shuffled) data.")
    sampler = LengthGroupedSampler(lengths, batch_size, seed) if lengths is not None else None
    return DataLoader(
        examples,
        batch_size=batch_size,
        shuffle=shuffle and sampler is None,
        sampler=sampler,
        collate_fn=FiberDataCollator(processor),
        generator=torch.Generator().manual_seed(seed),
        num_workers=num_workers,
        pin_memory=pin_memory,
        persistent_workers=num_workers > 0,
        prefetch_factor=4 if num_workers > 0 else None,
        multiprocessing_context=worker_context if num_workers > 0 else None,
    )
