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
The FIBER metric scores answers to video fill-in-the-blank questions against the many correct answers of each blank
(the original phrase and every annotator's answers): exact match (EM) is 100 when the normalized answer equals a
normalized correct answer, else 0, and F1 is the best token-set F1 over the correct answers. Normalization
lower-cases, deletes ASCII punctuation and the words "a", "an" and "the", and collapses white space (text that is not
ASCII is first put in NFKC form, without format characters). Scores are in percent, averaged over blanks; optionally
per example, by category, Correct@K and MAP of ranked candidates, with bootstrap confidence intervals, and, with the
config "human_agreement", the human agreement of the paper's Table 2.
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
    confidence_level (`float`, optional): e.g. 0.95: adds a percentile bootstrap interval to every mean, from
        `num_bootstrap` (10,000) resamples of the blanks drawn with numpy's generator seeded by `seed` (0).

Returns:
    exact_match, f1 (`float`): the means, in percent (0-100).
    exact_match_per_example, f1_per_example (`list` of `float`), correct_at_k_per_example (`dict`),
        average_precision_per_example (`list`): with `per_example`, every blank's scores (0-100), in input order.
    exact_match_by_category, f1_by_category (`dict` of `str` to `float`), count_by_category: with `categories`.
    correct_at_k (`dict` of `str` to `float`): with `candidates`, for K = 1, 2, 4, ... up to the longest list, the
        percent of blanks with a correct candidate in the top K; map (`float`): the mean average precision.
    exact_match_ci, f1_ci, map_ci, correct_at_k_ci, exact_match_ci_by_category, f1_ci_by_category: with
        `confidence_level`, [low, high] in percent for the mean of the same name; each depends only on its own scores.

    An answer that normalizes to nothing (e.g. "The!") matches one that does too (EM and F1 100), and nothing else.
    Lists of different lengths, a blank with no correct answer and items that are not strings raise a `ValueError`
    naming the index. With the config "human_agreement", `compute` takes `labels`, `additional_answers` (for every
    blank, one list of answers per annotator), optionally `annotator_ids` and `per_example` (see `human_agreement`).

Examples:
    The first two blanks of the paper's Table 7, filled in by T5 + I3D and by text-only T5:

    >>> fiber_metric = evaluate.load("metric/fiber_metric")
    >>> references = [
    ...     ["adirondacks", "cliff", "climb", "frozen waterfall", "gully", "hill", "ice", "icy cliff",
    ...      "ledge", "mountain", "ravine", "slope", "snow"],
    ...     ["building", "doors", "entryway", "foyer", "his home", "his house", "home", "house",
    ...      "living room", "room", "shorts", "t-shirt"],
    ... ]
    >>> fiber_metric.compute(predictions=["a mountain", "a room"], references=references)
    {'exact_match': 100.0, 'f1': 100.0}
    >>> fiber_metric.compute(predictions=["a tree", "a gym"], references=references)
    {'exact_match': 0.0, 'f1': 0.0}
    >>> predictions = ["icy mountain", "The house!"]
    >>> results = fiber_metric.compute(predictions=predictions, references=references, per_example=True)
    >>> print(round(results["f1"], 2), results["f1_per_example"], results["exact_match_per_example"])
    83.33 [66.66666666666667, 100.0] [0.0, 100.0]

    Ranked candidates; "a cliff" and "Cliff" are one candidate, so "hill" is second:

    >>> results = fiber_metric.compute(
    ...     predictions=["a tree", "a room"],
    ...     references=references,
    ...     candidates=[["a tree", "a cliff", "Cliff", "hill"], ["a room", "a gym"]],
    ... )
    >>> results["correct_at_k"], round(results["map"], 2)
    ({'1': 50.0, '2': 100.0, '4': 100.0}, 79.17)

    A 95% confidence interval, from 10,000 resamples of 400 blanks of which 60% match:

    >>> results = fiber_metric.compute(
    ...     predictions=["a mountain"] * 240 + ["a tree"] * 160, references=[references[0]] * 400, confidence_level=0.95
    ... )
    >>> results["exact_match"], [round(bound) for bound in results["exact_match_ci"]]
    (60.0, [55, 65])
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
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(features),
            homepage="https://lit.eecs.umich.edu/fiber/",
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
