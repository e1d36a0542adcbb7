"""FIBER metric: exact match and token-set F1 of fill-in-the-blank answers against many correct answers.

This file is the `fiber_metric` evaluate module: its documentation and the `evaluate.Metric` class.
The functions that do the work are in the modules beside it, which `evaluate.load` copies with it:
scores.py (`normalize_answer`, `exact_match`, `f1`, `score_predictions`, `correct_at_k`,
`average_precision`, `references_from_example`), statistics.py (`mean_std`, the bootstrap and the
paired tests), agreement.py (`human_agreement`), inputs.py (the checks of every input) and
citation.py (the paper's BibTeX entry). None imports anything from the FIBER package, so the folder
can be pushed to the Hub as it is.
"""

import datasets
import evaluate

# `evaluate.load` copies the files this script imports (`from .x import` at the start of a line), not the files
# those import: every module of the folder is imported here, statistics.py (which scores.py uses) too. No comment
# may end these lines: evaluate would read it as the URL of the file to download.
from .agreement import human_agreement
from .citation import CITATION as _CITATION
from .inputs import check_annotations, check_predictions
from .scores import score_predictions
from .statistics import confidence_interval

_DESCRIPTION = """\
The FIBER metric scores answers to video fill-in-the-blank questions. Each blank has many correct
answers (the original phrase plus every annotator's answers), so an answer is scored against all
of them: exact match (EM) is 100 when the normalized answer equals any normalized correct answer,
else 0, and F1 is the best token-set F1 over the correct answers. Normalization lower-cases,
deletes ASCII punctuation and the whole words "a", "an" and "the", and collapses white space
(text that is not ASCII is first put in NFKC form, without format characters).
Scores are in percent, and averaged over blanks. Optional outputs: per-example scores, scores
by semantic category, Correct@K and MAP of ranked candidate answers (e.g. beams), bootstrap
confidence intervals, and, with the config "human_agreement", the human agreement of the paper's
Table 2. Plain functions compare two systems on the same blanks (paired bootstrap, approximate
randomization, McNemar's exact test).
"""

_KWARGS_DESCRIPTION = """
Scores predicted answers against the correct answers of each blank.

Args:
    predictions (`list` of `str`): one predicted answer per blank.
    references (`list` of `list` of `str`): for each blank, its correct answers: the label and
        every annotator's answers, flattened (`references_from_example` builds this list from a
        FIBER row). A single string is read as a list of one answer (label-only scoring).
    per_example (`bool`, defaults to `False`): also return the score of every blank.
    categories (`list` of `str`, optional): the semantic category of every blank (the paper's
        Table 4); adds scores by category.
    candidates (`list` of `list` of `str`, optional): for every blank, the model's ranked candidate
        answers, best first (e.g. its beams); adds Correct@K and MAP.
    confidence_level (`float`, optional): e.g. 0.95; adds a percentile bootstrap confidence
        interval to every mean: the blanks are resampled with replacement `num_bootstrap` times
        (default 10,000) with numpy's generator seeded by `seed` (default 0), and the interval runs
        from the (1 - level) / 2 to the (1 + level) / 2 quantile of the resampled means.

Returns:
    exact_match (`float`): mean exact match, in percent (0-100).
    f1 (`float`): mean of the best token-set F1 over each blank's correct answers, in percent (0-100).
    exact_match_per_example (`list` of `float`): with `per_example`, 0 or 100 for every blank, in input order.
    f1_per_example (`list` of `float`): with `per_example`, the F1 of every blank, in percent (0-100).
    correct_at_k_per_example (`dict` of `str` to `list` of `float`), average_precision_per_example
        (`list` of `float`): with `per_example` and `candidates`, every blank's Correct@K (0 or 100)
        and average precision (0-100).
    exact_match_by_category, f1_by_category (`dict` of `str` to `float`): with `categories`, the
        means in percent (0-100) within each category;
    count_by_category (`dict` of `str` to `int`): with `categories`, the number of blanks of each.
    correct_at_k (`dict` of `str` to `float`): with `candidates`, for K = 1, 2, 4, 8, ... up to the
        longest candidate list, the percent (0-100) of blanks with a correct candidate in the top K.
    map (`float`): with `candidates`, the mean average precision of the candidate lists, in percent (0-100).
    exact_match_ci, f1_ci, map_ci (`list` of two `float`), correct_at_k_ci (`dict` of `str` to such
        a list), exact_match_ci_by_category, f1_ci_by_category (`dict` of `str` to such a list): with
        `confidence_level`, [low, high] in percent, for the mean of the same name. Each interval
        depends only on its own per-blank scores, `num_bootstrap` and `seed`; a category's
        resamples its own blanks (see `bootstrap_means` for how the resamples are drawn).

    A candidate is correct when it exactly matches a correct answer after normalization. Candidates
    that normalize to the same string count once, at their first rank: the rest are dropped before
    ranking. Average precision is the mean of Precision@k over the ranks k that hold a correct
    candidate, and 0 when none does.

    Empty answers: an answer that normalizes to nothing (e.g. "The!") against a correct answer that
    also does scores EM 100 and F1 100; against one that keeps a token, 0. An empty `predictions` list
    gives 0 for every score. Lists of different lengths, a blank with no correct answer and
    non-string items raise a `ValueError` that names the index.

    With the config "human_agreement" (`evaluate.load(path, "human_agreement")`), `compute` takes
    `labels` (`list` of `str`), `additional_answers` (for every blank, one list of answers per
    annotator), optionally `annotator_ids` (for every blank, one id per annotator) and
    `per_example`, and returns the human agreement of the paper's Table 2 as the FIBER release
    computed it (see `human_agreement`).

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

    Partial overlap: "icy mountain" shares one token with "mountain" and with "icy cliff":

    >>> results = fiber_metric.compute(
    ...     predictions=["icy mountain", "The house!"], references=references, per_example=True
    ... )
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
    ...     predictions=["a mountain"] * 240 + ["a tree"] * 160,
    ...     references=[references[0]] * 400,
    ...     confidence_level=0.95,
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
            # Nested references only: with a flat option listed first, `evaluate` silently stores lists
            # as strings such as "['a', 'b']"; `add_batch` turns a blank's single string into a list.
            features = {
                "predictions": datasets.Value("string"),
                "references": datasets.Sequence(datasets.Value("string")),
            }
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
        """Checks every item of a batch, then stores it.

        `evaluate` checks only the first item of each column and turns the others into strings:
        a prediction 3 would be stored as "3", and one bad reference makes it store every answer
        of the batch JSON-quoted ('"a"'), with no error. An error here names the index in the batch.
        """
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
        score = human_agreement if self.config_name == "human_agreement" else score_predictions
        return score(**inputs)
