"""FIBER metric: exact match and token-set F1 of fill-in-the-blank answers against many correct answers.

This file is the `fiber_metric` evaluate module, a thin class around the plain functions beside it, which
`evaluate.load` copies with it: scores.py (every score, one example at a time), statistics.py (intervals and paired
tests), agreement.py (human agreement), inputs.py (the input checks), citation.py. None imports the FIBER package.
"""

import datasets
import evaluate

# `evaluate.load` copies the files this script imports (`from .x import` at the start of a line), not the files
# those import: every module of the folder is imported here. No comment may end these lines: evaluate would read it
# as the URL of the file to download.
from .agreement import human_agreement
from .citation import CITATION as _CITATION
from .inputs import check_annotations, check_predictions
from .scores import score_predictions
from .statistics import confidence_interval

_DESCRIPTION = """\
The FIBER metric scores answers to video fill-in-the-blank questions against the many correct answers of each blank:
exact match (EM) is 100 when the normalized answer (lower-cased, without ASCII punctuation, the words "a", "an" and
"the" and repeated white space) equals a normalized correct answer, else 0; F1 is the best token-set F1 over them. In
percent, averaged over blanks; also the release's model F1, agreement-weighted accuracy, scores per example and by
category, Correct@K and MAP, bootstrap intervals, and (config "human_agreement") the human agreement of Table 2.
"""

_KWARGS_DESCRIPTION = """
Scores predicted answers against the correct answers of each blank.

Args:
    predictions (`list` of `str`): one predicted answer per blank.
    references (`list` of `list` of `str`): each blank's correct answers (the label and every annotator's answers;
        `references_from_example` makes them from a FIBER row); one string is a list of one answer.
    per_example (`bool`, defaults to `False`): also return the score of every blank.
    categories (`list` of `str`, optional): the semantic category of every blank (Table 4): adds scores by category.
    candidates (`list` of `list` of `str`, optional): every blank's ranked answers, best first (e.g. beams): adds
        Correct@K and MAP. Candidates that normalize alike count once, at their first rank.
    labels (`list` of `str`, optional): every blank's label (the original phrase): adds the label-only scores.
    additional_answers (`list` of `list` of `list` of `str`, optional; with `labels`): every blank's answers, one list
        per annotator: adds `vqa_accuracy`.
    confidence_level (`float`, optional): e.g. 0.95: adds a percentile bootstrap interval to every mean, from
        `num_bootstrap` (10,000) resamples of the blanks drawn with numpy's generator seeded by `seed` (0).

Returns:
    exact_match, f1 (`float`): the means, in percent (0-100). f1 is the paper's text's definition, the one to report.
    f1_release (`float`): F1 as the release's code computed it for models (`F1ScoreMany`): raw answers split on white
        space, no normalization; 1.7 to 3.5 points above f1 on data shaped like FIBER. For comparing with Table 3.
    exact_match_label_only, f1_label_only, f1_release_label_only (`float`): with `labels`, against the label alone.
    vqa_accuracy (`float`): with `additional_answers`, agreement-weighted accuracy (`vqa_accuracy`, VQA's form).
    *_per_example (`list` of `float`), correct_at_k_per_example (`dict`), average_precision_per_example (`list`):
        with `per_example`, every blank's scores (0-100), in input order.
    exact_match_by_category, f1_by_category (`dict` of `str` to `float`), count_by_category: with `categories`.
    correct_at_k (`dict` of `str` to `float`): with `candidates`, for K = 1, 2, 4, ... up to the longest list, the
        percent of blanks with a correct candidate in the top K; map (`float`): the mean average precision.
    *_ci (exact_match_ci, f1_ci, ...), exact_match_ci_by_category, f1_ci_by_category: with `confidence_level`,
        [low, high] in percent for the mean of the same name; each depends only on its own scores.

    An answer that normalizes to nothing (e.g. "The!") matches one that does too (EM and F1 100), and nothing else.
    Lists of different lengths, a blank with no correct answer and items that are not strings raise a `ValueError`
    naming the index. With the config "human_agreement", `compute` takes `labels`, `additional_answers` (for every
    blank, one list of answers per annotator), optionally `annotator_ids` and `per_example` (see `human_agreement`).

Examples:
    The first blank of the paper's Table 7, filled in by T5 + I3D and by text-only T5 (more in the metric card):

    >>> fiber_metric = evaluate.load("metric/fiber_metric")
    >>> references = [["adirondacks", "cliff", "frozen waterfall", "icy cliff", "mountain", "slope", "snow"]] * 2
    >>> fiber_metric.compute(predictions=["a mountain", "a tree"], references=references)
    {'exact_match': 50.0, 'f1': 50.0, 'f1_release': 33.333333333333336}
    >>> results = fiber_metric.compute(predictions=["a mountain", "a tree"], references=references, per_example=True)
    >>> results["exact_match_per_example"], results["f1_per_example"], results["f1_release_per_example"]
    ([100.0, 0.0], [100.0, 0.0], [66.66666666666667, 0.0])

    The label alone, and agreement-weighted accuracy ("dog" from 2 of 3 annotators, the label one: 4/9):

    >>> results = fiber_metric.compute(predictions=["a dog"], references=[["puppy", "dog"]], labels=["puppy"],
    ...                                additional_answers=[[["dog"], ["a dog"]]])
    >>> results["exact_match_label_only"], round(results["vqa_accuracy"], 1)
    (0.0, 44.4)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class FiberMetric(evaluate.Metric):
    def _info(self):
        if self.config_name == "human_agreement":
            features = {
                "labels": datasets.Value("string"),
                "additional_answers": datasets.Sequence(datasets.Sequence(datasets.Value("string"))),
            }
        elif self.config_name == "default":
            # Nested references only: with a flat option listed first, `evaluate` silently stores lists as strings
            # such as "['a', 'b']"; `add_batch` turns a blank's single string into a list.
            features = {"predictions": datasets.Value("string"),
                        "references": datasets.Sequence(datasets.Value("string"))}
        else:
            raise ValueError(f"Unknown config {self.config_name!r}: use 'default' or 'human_agreement'")
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation=_CITATION, inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(features), homepage="https://lit.eecs.umich.edu/fiber/",
            reference_urls=["https://arxiv.org/abs/2210.05038"],  # FIRE: Correct@K and MAP
        )

    def add_batch(self, **batch):
        """Checks every item of a batch, then stores it: `evaluate` checks only the first item of each column and turns
        the others into strings (a prediction 3 stored as "3"). An error names the index in the batch."""
        check = check_annotations if self.config_name == "human_agreement" else check_predictions
        names = list(self.features)
        try:
            checked = check(*(batch.get(name) for name in names))
        except ValueError as error:
            if not len(self):
                raise
            raise ValueError(f"{error} (in the batch added after the first {len(self)} examples)") from None
        super().add_batch(**{**batch, **dict(zip(names, checked))})

    def add(self, *, prediction=None, reference=None, **kwargs):
        """Stores one example, checked as a batch of one."""
        example = {"predictions": prediction, "references": reference, **kwargs}
        self.add_batch(**{name: [example.get(name)] for name in self.features})

    def _compute(self, **inputs):
        return (human_agreement if self.config_name == "human_agreement" else score_predictions)(**inputs)
