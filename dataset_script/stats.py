"""`fiberbench stats`: answer statistics of a release-format file, as in the paper's Table 1 and appendix
(gender words §A.5, top answers Fig. 5, POS sequences Fig. 7), as JSON, Markdown and PNG charts (the `plots` extra).
"""

import argparse
import logging
import statistics
from collections import Counter
from pathlib import Path

from fiberbench.cli import add_output_arguments, arguments_of, positive_int
from fiberbench.errors import DataError
from fiberbench.metric import mean_std, normalize_answer
from fiberbench.modeling.noun_phrases import answer_spans, is_noun_phrase_span, load_spacy_pipeline, pipeline_name
from fiberbench.outputs import atomic_folder, check_output, finish_output, output_lock, start_output, write_json
from fiberbench.outputs import write_text
from fiberbench.records import read_release_records

from .provenance import sample_file_name, synthetic_file_notice

logger = logging.getLogger(__name__)

COMMAND = "fiberbench stats"
# §A.5 of the paper, verbatim.
GENDER_WORDS = {
    "male": ("boy", "brother", "father", "guy", "he", "him", "himself", "his", "male", "man", "son"),
    "female": ("daughter", "female", "girl", "her", "herself", "lady", "mother", "she", "sister", "woman"),
    "neutral": ("adult", "baby", "child", "human", "kid", "parent", "people", "person", "sibling"),
}
# The paper counts "visual words (color, number, or size)" without publishing its lists: these are ours, written into
# every report beside the numbers they give.
VISUAL_WORDS = {
    "color": tuple("black blue brown gold golden gray green grey orange pink purple red silver white yellow".split()),
    "number": tuple("one two three four five six seven eight nine ten eleven twelve twenty hundred dozen pair".split()),
    "size": tuple("big enormous giant huge large little long massive medium mini short small tall tiny".split()),
}
TOP_ANSWERS = 20
TOP_POS_SEQUENCES = 10
GROUPS = {"labels": "original phrases", "annotations": "annotated answers"}
REPORT_FILES = ("stats.json", "stats.md")
CHART_KEYS = {"top_answers": "Top answers", "pos_sequences": "POS sequences"}


def _percent(count: int, total: int) -> float | None:
    return 100 * count / total if total else None


def _mean_std(values: list[float]) -> dict:
    """Mean and population standard deviation (None for no values)."""
    return mean_std(values)._asdict() if values else {"mean": None, "std": None}


def _ranked(counter: Counter, total: int, top: int) -> list[dict]:
    """The `top` most common items with their counts and shares (ties in first-seen order)."""
    return [{"value": value, "count": n, "percent": _percent(n, total)} for value, n in counter.most_common(top)]


def answer_statistics(answers: list[str], spans: list) -> dict:
    """Statistics of one group of answers; `spans` are their spans in their filled captions."""
    tokens = [normalize_answer(answer).split() for answer in answers]
    word_sets = [set(answer_tokens) for answer_tokens in tokens]
    visual_words = {word for words in VISUAL_WORDS.values() for word in words}
    pos_sequences = Counter(" ".join(token.pos_ for token in span) for span in spans if span is not None)
    total = len(answers)
    return {
        "num_answers": total,
        "noun_phrases_percent": _percent(sum(span is not None and is_noun_phrase_span(span) for span in spans), total),
        "characters_per_token": _mean_std([len(token) for answer_tokens in tokens for token in answer_tokens]),
        "tokens": _mean_std([len(answer_tokens) for answer_tokens in tokens]),
        "visual_words_percent": _percent(sum(bool(words & visual_words) for words in word_sets), total),
        "gender_words_percent": {gender: _percent(sum(bool(words.intersection(gender_words)) for words in word_sets),
                                                  total) for gender, gender_words in GENDER_WORDS.items()},
        "top_answers": _ranked(Counter(" ".join(answer_tokens) for answer_tokens in tokens), total, TOP_ANSWERS),
        "pos_sequences": _ranked(pos_sequences, total, TOP_POS_SEQUENCES),
    }


def compute_stats(records: list[dict], nlp, batch_size: int = 256) -> dict:
    """All statistics of validated release-format records (`additional_answers` is [] in train)."""
    groups = {
        "labels": [(record["masked_caption"], record["label"]) for record in records],
        "annotations": [(record["masked_caption"], answer) for record in records
                        for answers in record["additional_answers"] for answer in answers],
    }
    pairs = groups["labels"] + groups["annotations"]
    spans = list(answer_spans([caption for caption, _ in pairs], [answer for _, answer in pairs], nlp, batch_size))
    stats = {"num_captions": len(records), "spacy_pipeline": pipeline_name(nlp)}
    split = len(groups["labels"])
    for name, group_spans in (("labels", spans[:split]), ("annotations", spans[split:])):
        stats[name] = answer_statistics([answer for _, answer in groups[name]], group_spans)
    unique = [[{normalize_answer(answer) for answer in answers} - {""} for answers in record["additional_answers"]]
              for record in records if record["additional_answers"]]
    stats["annotations"]["unique_answers_per_caption"] = _mean_std([len(set().union(*sets)) for sets in unique])
    per_annotator = [statistics.fmean(len(answers) for answers in sets) for sets in unique]
    stats["annotations"]["unique_answers_per_caption_per_annotator"] = _mean_std(per_annotator)
    stats["word_lists"] = {"gender (paper §A.5)": GENDER_WORDS, "visual (ours; the paper has no list)": VISUAL_WORDS}
    return stats


def _percent_cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}%"


def _mean_std_cell(value: dict | None) -> str:
    return "–" if value is None or value["mean"] is None else f"{value['mean']:.2f} ± {value['std']:.2f}"


# Table 1 of the paper: (row title, statistic, cell format); the per-caption rows are of annotations only.
TABLE_1_ROWS = (
    ("Noun phrases", "noun_phrases_percent", _percent_cell),
    ("Unique answers per caption", "unique_answers_per_caption", _mean_std_cell),
    ("Unique answers per caption per annotator", "unique_answers_per_caption_per_annotator", _mean_std_cell),
    ("Characters per token", "characters_per_token", _mean_std_cell),
    ("Tokens", "tokens", _mean_std_cell),
    ("Visual word use (color, number, or size)", "visual_words_percent", _percent_cell),
)


def stats_markdown(stats: dict, source: str, sample_file: str | None = None) -> str:
    """The statistics as a Markdown report: Table 1, gender words, top answers, POS sequences; headed SYNTHETIC when
    the file is the bundled sample's `sample_file`."""
    groups = labels, annotations = stats["labels"], stats["annotations"]
    rows = [(title, *(cell(group.get(key)) for group in groups)) for title, key, cell in TABLE_1_ROWS]
    shares = [group["gender_words_percent"] for group in groups]
    rows += [(f"{gender.capitalize()} words", *(_percent_cell(share[gender]) for share in shares))
             for gender in GENDER_WORDS]
    lines = [
        f"# FIBER answer statistics of {source}", "",
        *([synthetic_file_notice(sample_file), ""] if sample_file is not None else []),
        f"{stats['num_captions']} captions; {labels['num_answers']} original phrases, {annotations['num_answers']} "
        f"annotated answers. spaCy pipeline: {stats['spacy_pipeline']}. Tokens are counted after normalization; "
        "the noun-phrase share is of the answers as given (use `fiberbench answers --keep_non_noun_phrases` "
        "for the share before filtering).", "",
        "| Statistic | Original phrases | Annotated |", "|---|---|---|", *(f"| {' | '.join(row)} |" for row in rows),
    ]
    for title, key in (("Top answers (normalized)", "top_answers"), ("POS sequences", "pos_sequences")):
        lines += ["", f"## {title}", "", "| Rank | Original phrases | % | Annotated | % |", "|---|---|---|---|---|"]
        ranked = (labels[key], annotations[key])
        for rank in range(max(map(len, ranked))):
            cells = [f"{row[rank]['value']} | {row[rank]['percent']:.2f}" if rank < len(row) else " | "
                     for row in ranked]
            lines.append(f"| {rank + 1} | {' | '.join(cells)} |")
    lines += ["", "## Word lists", ""]
    for kind, lists in stats["word_lists"].items():
        lines += [f"- {kind}, {name}: {', '.join(words)}" for name, words in lists.items()]
    return "\n".join(lines) + "\n"


def chart_figure(stats: dict, key: str, source: str):
    """The bar chart of `key` (a `CHART_KEYS` key): the labels' panel beside the answers', on one percent scale, each
    bar labelled with its percent, the title naming `source`."""
    from matplotlib.figure import Figure

    height = 0.32 * max(len(stats[group][key]) for group in GROUPS) + 1.8
    figure = Figure(figsize=(12, height), layout="constrained")
    axes = figure.subplots(1, len(GROUPS), sharex=True, squeeze=False)[0]
    for ax, (group, group_title) in zip(axes, GROUPS.items()):
        entries = stats[group][key][::-1]  # the largest at the top
        bars = ax.barh([entry["value"] for entry in entries], [entry["percent"] for entry in entries], color="tab:blue")
        ax.bar_label(bars, labels=[f"{entry['percent']:.1f}%" for entry in entries], padding=3, fontsize=9)
        ax.set_title(group_title, fontsize=12)
        ax.set_xlabel(f"% of the {stats[group]['num_answers']:,} {group_title}", fontsize=11)
        ax.tick_params(labelsize=10)
    axes[0].set_xlim(0, 1.15 * max((entry["percent"] for group in GROUPS for entry in stats[group][key]), default=1))
    figure.suptitle(f"{CHART_KEYS[key]} of {source}", fontsize=13)
    return figure


def write_charts(stats: dict, output_dir: Path, source: str) -> list[Path]:
    """PNG bar charts (`chart_figure`) of the top answers and POS sequences of `source` into `output_dir`; none (with
    a note) without matplotlib, an optional extra."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        logger.warning("matplotlib is not installed: no charts (`pip install fiber-benchmark[plots]` adds them).")
        return []
    for key in CHART_KEYS:
        chart_figure(stats, key, source).savefig(output_dir / f"{key}.png", dpi=120)
    return [output_dir / f"{key}.png" for key in CHART_KEYS]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="Release-format JSON / JSON Lines file (e.g. val.json).")
    add_output_arguments(parser, "The folder to write: stats.json, stats.md and the PNGs.", "Replace what stats wrote.",
                         folder=True)
    parser.add_argument("--spacy_model", help="spaCy pipeline of noun phrases and POS tags (default: as `blank`'s).")
    parser.add_argument("--batch_size", type=positive_int, default=256, help="Texts per nlp.pipe batch.")


def check_lengths(records: list[dict], nlp, file: str) -> None:
    """Refuse a caption that spaCy would refuse once an answer fills its blank (longer than `nlp.max_length`)."""
    for index, record in enumerate(records):
        answers = [record["label"], *(answer for group in record["additional_answers"] for answer in group)]
        if (longest := len(record["masked_caption"]) + max(map(len, answers))) > nlp.max_length:
            problem = f"{longest:,} characters with its longest answer, more than the spaCy pipeline takes"
            raise DataError(f"{file}: record {index}: field 'masked_caption': {problem} ({nlp.max_length:,})")


def run(args: argparse.Namespace) -> int:
    with output_lock(args.output_dir, "--output_dir"):
        check_output(args.output_dir, command=COMMAND, flag="--output_dir", overwrite=args.overwrite_output_dir,
                     inputs=[args.file], folder=True)
        records = read_release_records(args.file)
        if not records:
            raise DataError(f"{args.file}: holds no records (an empty file?)")
        sample_file = sample_file_name(args.file, "Statistics")
        nlp = load_spacy_pipeline(args.spacy_model)
        check_lengths(records, nlp, str(args.file))
        stats = compute_stats(records, nlp, args.batch_size) | {"synthetic": sample_file is not None}
        with atomic_folder(args.output_dir) as staging:
            record = start_output(staging, COMMAND, None, folder=True, arguments=arguments_of(args))
            write_json(staging / REPORT_FILES[0], stats)
            write_text(staging / REPORT_FILES[1], stats_markdown(stats, args.file.name, sample_file))
            charts = write_charts(stats, staging, args.file.name)
            finish_output(staging, record)
    logger.info("Wrote %s to %s", ", ".join([*REPORT_FILES, *(chart.name for chart in charts)]), args.output_dir)
    return 0
