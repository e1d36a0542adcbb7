"""The clips a run of `fiberbench predict` works on: its dataset split, each row's clip and video, and their batches.

Read before any generation, by a run and by --reread alike: a clip twice in the split, or a video
that is missing or cannot give the frames asked, is one error line before any work.

Then a run's data loader (`make_loader`) makes each batch's inputs in worker processes while the
model generates. A batch's inputs are what its predictor's `inputs` makes of its rows: the
captions' prompts tokenized, a FIBER model's video features read from the dataset, a
video-language model's clips decoded with PyAV, their frames sampled and processed. None of it
needs the model, so a `DataLoader` with `--dataloader_num_workers` workers makes the next batches
while this process generates (each worker holds 4 batches ahead; on a GPU they come in page-locked
memory, for fast copies). Batches come in order whatever the number of workers, and each worker
calls the same code on the same rows, so the predictions do not depend on it.

Workers are started as the platform's default (a fork of this process on Linux), so they need
nothing of the caller's `__main__`; where they are spawned instead, the batches are pickled, their
predictor without its model (`Predictor.__getstate__`). A clip that fails to decode in a worker
comes back as a batch carrying its one-line error, raised here as a `DataError` (a worker's
exception would come wrapped in its traceback).
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fiberbench.errors import DataError

if TYPE_CHECKING:
    import datasets
    import torch

    from fiberbench.records import ClipKey
    from fiberbench.videos import ClipVideo

    from fiberbench.predict.predictors import Predictor

# Batches each worker makes ahead of the model.
PREFETCH_BATCHES = 4


def load_split(dataset_name: str | None, split: str, max_predict_samples: int | None, config_name: str):
    """The clips to predict: the `split` of the dataset (or of the bundled sample) in its config `config_name`, its
    first `max_predict_samples` clips (all with None)."""
    from fiberbench.data import load_fiber

    splits = load_fiber(dataset_name, config_name)
    if split not in splits:
        raise DataError(
            f"--dataset_name {dataset_name or '(the bundled sample)'} has no split {split!r} "
            f"(splits: {', '.join(splits)})"
        )
    clips = splits[split]
    if max_predict_samples is not None:
        clips = clips.select(range(min(max_predict_samples, len(clips))))
    return clips


def clip_keys(split, described: str) -> "list[ClipKey]":
    """Each row's clip (video_id, video_start_time, video_end_time); a clip twice in the split is a DataError."""
    keys = list(zip(split["video_id"], split["video_start_time"], split["video_end_time"]))
    first_row = {}
    for index, key in enumerate(keys):
        if key in first_row:
            raise DataError(f"{described}: rows {first_row[key]} and {index} are the same clip {key}")
        first_row[key] = index
    return keys


def dataset_fingerprint(split, reads_features: bool) -> str:
    """The fingerprint of what a model reads of each row (`split_fingerprint`): a rebuilt dataset with other captions
    or features is other data, for a resumed run and for --reread alike."""
    from fiberbench.data.loading import split_fingerprint
    from fiberbench.records import KEY_FIELDS

    return split_fingerprint(split, [*KEY_FIELDS, "masked_caption", *(["video_features"] if reads_features else [])])


@dataclass
class PredictBatch:
    """One batch of rows and what the model reads of it."""

    indices: list[int]  # the batch's rows, as indices in the split, in order
    present: list[int]  # those put to the model: every row but a clip without a video (--skip_missing_videos)
    masked_captions: list[str]  # the present rows' captions
    inputs: Any = None  # `Predictor.inputs` of the present rows (None when there are none)
    error: str | None = None  # a clip that could not be decoded: the batch is not put to the model

    def pin_memory(self) -> "PredictBatch":
        """The batch with its tensors in page-locked memory (what a DataLoader with `pin_memory` calls)."""
        self.inputs = pinned(self.inputs)
        return self


def pinned(value):
    """`value` with every tensor in it in page-locked memory: a tensor, or a mapping (a `BatchFeature`, a
    `BatchEncoding`, changed in place), list or tuple holding tensors."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.pin_memory()
    if isinstance(value, Mapping):
        for key in list(value):
            value[key] = pinned(value[key])
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(pinned(item) for item in value)
    return value


class PredictBatches:
    """The batches of one process's rows (`shard`, in order, `batch_size` a batch), item i the i-th batch made ready
    for the model by `predictor.inputs`.

    A map-style dataset as a `DataLoader` reads one (`__len__`, `__getitem__`), written without torch's base class so
    that the clips can be read (a rerun with nothing to do, --reread) without importing torch.
    """

    def __init__(
        self,
        predictor: "Predictor",
        shard: Sequence[int],
        batch_size: int,
        split: "datasets.Dataset",
        videos: "Sequence[ClipVideo | None] | None",
    ):
        self.predictor = predictor
        self.shard = list(shard)
        self.batch_size = batch_size
        self.captions = list(split["masked_caption"])
        # Read a batch at a time, as numpy arrays, only by the kinds that read them.
        self.features = split.with_format("numpy") if predictor.reads_features else None
        self.videos = videos

    def __len__(self) -> int:
        return math.ceil(len(self.shard) / self.batch_size)

    def __getitem__(self, number: int) -> PredictBatch:
        indices = self.shard[number * self.batch_size : (number + 1) * self.batch_size]
        present = [index for index in indices if self.videos is None or self.videos[index] is not None]
        rows = [{"masked_caption": self.captions[index]} for index in present]
        if self.features is not None and present:
            for row, features in zip(rows, self.features[present]["video_features"]):
                row["video_features"] = features
        if self.predictor.reads_video:
            for row, index in zip(rows, present):
                row["video"] = self.videos[index]
        batch = PredictBatch(indices, present, [row["masked_caption"] for row in rows])
        try:
            batch.inputs = self.predictor.inputs(rows) if rows else None
        except DataError as error:
            batch.error = str(error)
        return batch


def make_loader(
    predictor: "Predictor",
    shard: Sequence[int],
    *,
    batch_size: int,
    split: "datasets.Dataset",
    videos: "Sequence[ClipVideo | None] | None",
    num_workers: int,
    pin_memory: bool = False,
) -> "torch.utils.data.DataLoader":
    """The batches of `shard` (row indices of `split`), in order, made by `num_workers` worker processes (0: by this
    one as they are needed); `videos` are each row's clip video, for the kinds that read them."""
    import torch

    batches = PredictBatches(predictor, shard, batch_size, split, videos)
    num_workers = min(num_workers, len(batches))  # a worker with no batch to make would only cost its start
    return torch.utils.data.DataLoader(
        batches,
        batch_size=None,  # each item is a whole batch already (its inputs made together, as the model reads them)
        num_workers=num_workers,
        pin_memory=pin_memory,
        prefetch_factor=PREFETCH_BATCHES if num_workers > 0 else None,
    )
