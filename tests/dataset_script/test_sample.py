"""The bundled SYNTHETIC sample and the tokenizer trained on it: committed as their makers write them; designed so that
the features tell the blanked item and the text does not."""

import json
from collections import Counter, defaultdict

import numpy as np

from fiberbench.data import SAMPLE_DIR
from fiberbench.data.fiber.make_sample import ITEMS, make_sample
from fiberbench.data.fiber.make_sample_tokenizer import main as make_tokenizer
from fiberbench.modeling import SAMPLE_TOKENIZER_PATH
from fiberbench.records import clip_key, feature_file_name


def test_the_committed_sample_and_tokenizer_are_what_their_makers_write(tmp_path):
    make_sample(tmp_path / "sample")
    written = sorted(path.relative_to(tmp_path / "sample") for path in (tmp_path / "sample").rglob("*") if path.is_file())
    assert written == sorted(path.relative_to(SAMPLE_DIR) for path in SAMPLE_DIR.rglob("*") if path.is_file())
    assert all((tmp_path / "sample" / name).read_bytes() == (SAMPLE_DIR / name).read_bytes() for name in written)
    assert (SAMPLE_DIR / "README.md").read_text().startswith("# FIBER bundled sample: SYNTHETIC data")
    make_tokenizer(["--output_dir", str(tmp_path / "tokenizer")])
    for path in SAMPLE_TOKENIZER_PATH.iterdir():
        assert (tmp_path / "tokenizer" / path.name).read_bytes() == path.read_bytes(), path.name


def test_the_text_does_not_tell_the_item_and_the_features_do():
    train, test = (json.loads((SAMPLE_DIR / f"{split}.json").read_text()) for split in ("train", "test"))
    items_per_caption = defaultdict(list)
    for record in train:
        items_per_caption[record["masked_caption"]].append(record["label"].lower())
    frequent = [items for items in items_per_caption.values() if len(items) >= 10]
    assert len(frequent) >= 3 and all(len(set(items)) >= min(len(items), len(ITEMS)) * 0.6 for items in frequent)
    labels = Counter(label for items in items_per_caption.values() for label in items)
    assert labels.most_common(1)[0][1] / labels.total() < 2.5 / len(ITEMS)

    def pooled(records):
        features = [np.load(SAMPLE_DIR / "i3d" / feature_file_name(*clip_key(r)))[0].mean(axis=0) for r in records]
        return np.stack(features), [record["label"].lower() for record in records]

    (train_features, train_labels), (test_features, test_labels) = pooled(train), pooled(test)
    names = sorted(set(train_labels))
    centroids = np.stack([train_features[[label == name for label in train_labels]].mean(0) for name in names])
    predicted = [names[index] for index in ((test_features[:, None] - centroids[None]) ** 2).sum(-1).argmin(1)]
    assert np.mean([p == t for p, t in zip(predicted, test_labels)]) >= 0.9  # a nearest-centroid classifier
