"""The checks of the FIBER metric's inputs: lists of strings as deep as expected, of equal lengths; an error names the
index (`predictions[3]`, `references[1][2]`), as `evaluate` itself would not (it checks only a batch's first item)."""


def _list(values, name):
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__iter__"):
        raise ValueError(f"{name} must be a list, got {type(values).__name__}")
    return list(values)


def _strings(values, name, depth=1):
    """`values` as a string (depth 0) or as lists nested `depth` deep around strings; errors name the index."""
    if depth == 0:
        if not isinstance(values, str):
            raise ValueError(f"{name} must be a string, got {type(values).__name__}: {values!r}")
        return values
    if depth == 1 and type(values) is list and all(type(value) is str for value in values):
        return values  # as it is: the check alone, without a call per item
    return [_strings(value, f"{name}[{index}]", depth - 1) for index, value in enumerate(_list(values, name))]


def _answers(answers, name):
    """A blank's correct answers as a non-empty list of strings; one string is a list of one answer (a label)."""
    if isinstance(answers, str):
        return [answers]
    answers = _strings(answers, name)
    if not answers:
        raise ValueError(f"{name} is empty: every prediction needs at least one correct answer")
    return answers


def _check_same_length(name, values, other_name, others):
    if len(values) != len(others):
        missing = f"{other_name}[{len(others)}]" if len(values) > len(others) else f"{name}[{len(values)}]"
        lengths = f"({len(values)} != {len(others)})"
        raise ValueError(f"{name} and {other_name} differ in length {lengths}: {missing} is missing")


def check_predictions(predictions, references, categories=None, candidates=None, labels=None, additional_answers=None):
    """The inputs of `score_predictions` as lists, each item checked; an error names the index."""
    predictions = _strings(predictions, "predictions")
    references = [_answers(answers, f"references[{i}]") for i, answers in enumerate(_list(references, "references"))]
    _check_same_length("predictions", predictions, "references", references)
    if additional_answers is not None and labels is None:
        raise ValueError("additional_answers needs labels: the label counts as one more annotator")
    checked = []
    for name, values, depth in (("categories", categories, 1), ("candidates", candidates, 2), ("labels", labels, 1),
                                ("additional_answers", additional_answers, 3)):
        if values is not None:
            values = _strings(values, name, depth=depth)
            _check_same_length("predictions", predictions, name, values)
        checked.append(values)
    return predictions, references, *checked
def check_annotations(labels, additional_answers, annotator_ids=None):
    """The inputs of `human_agreement` as lists, each item checked; an error names the index."""
    labels = _strings(labels, "labels")
    additional_answers = _strings(additional_answers, "additional_answers", depth=3)
    _check_same_length("labels", labels, "additional_answers", additional_answers)
    if annotator_ids is not None:
        annotator_ids = _strings(annotator_ids, "annotator_ids", depth=2)
        _check_same_length("additional_answers", additional_answers, "annotator_ids", annotator_ids)
        for index, (annotators, ids) in enumerate(zip(additional_answers, annotator_ids)):
            _check_same_length(f"additional_answers[{index}]", annotators, f"annotator_ids[{index}]", ids)
            if len(set(ids)) != len(ids):
                raise ValueError(f"annotator_ids[{index}] names an annotator twice: {ids}")
    return labels, additional_answers, annotator_ids
