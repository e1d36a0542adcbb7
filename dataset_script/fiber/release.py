"""Where the FIBER release lives: its download URLs, the file names of a local copy, and the bundled sample's folder."""

from pathlib import Path

# The official release files, as linked from the project's GitHub README
# (https://github.com/MichiganNLP/video-fill-in-the-blank) and used by its data module; the category
# files are the ones behind the paper's Table 4. `?dl=1` makes Dropbox serve the file itself.
RELEASE_URLS = {
    "train": "https://www.dropbox.com/s/lc3e1ave94hz9tu/train.json?dl=1",
    "validation": "https://www.dropbox.com/s/t1dpotaz2sjjtxk/val.json?dl=1",
    "test": "https://www.dropbox.com/s/2nr7kooprjti975/test.json?dl=1",
}
RELEASE_CATEGORY_URLS = {
    "validation": "https://www.dropbox.com/s/3zxz9jtivg7oedr/val_label_categories.tsv?dl=1",
    "test": "https://www.dropbox.com/s/77koxiu59q2w0vl/test_label_categories.tsv?dl=1",
}
# The I3D features are VaTeX's (https://eric-xw.github.io/vatex-website/download.html), tens of GB:
# they are downloaded and extracted by hand and passed as a local folder.

# File names in a local copy of the release: the JSON files keep their names; the category files
# are looked for under the sample's names, then under the names of the release's downloads.
SPLIT_FILES = {"train": "train.json", "validation": "val.json", "test": "test.json"}
CATEGORY_FILES = {
    "validation": ("categories_val.tsv", "val_label_categories.tsv"),
    "test": ("categories_test.tsv", "test_label_categories.tsv"),
}
# The SYNTHETIC sample bundled with the package: a local copy of the release's format, with its I3D features.
SAMPLE_DIR = Path(__file__).parent / "sample"
