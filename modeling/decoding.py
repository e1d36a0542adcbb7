"""Blank decoding as in the FIBER paper (App. B.2): generation settings, end-of-answer rule, noun-phrase choice."""

from collections.abc import Sequence

import torch
from transformers import GenerationConfig, LogitsProcessor

from .noun_phrases import are_noun_phrases

# Beam sizes of the paper's best runs (App. B.2): fine-tuned text-only T5 2, T5 + I3D 4, late fusion 8.
PAPER_NUM_BEAMS = {"none": 2, "early": 4, "late": 8}


def paper_generation_config(config) -> GenerationConfig:
    """The paper's decoding settings for a model with this config: beams by fusion, at most 10
    new tokens, early stopping, no repeated bigrams; special tokens from the config."""
    generation_config = GenerationConfig.from_model_config(config)
    generation_config.update(
        num_beams=PAPER_NUM_BEAMS[config.fusion], max_new_tokens=10, early_stopping=True, no_repeat_ngram_size=2
    )
    return generation_config


class EosAfterAnswerLogitsProcessor(LogitsProcessor):
    """Allow nothing but `</s>` right after `<extra_id_1>`, the token that closes the answer.

    Without it a beam may go on after its answer and be ranked by tokens that are thrown away;
    with it every beam that closes its answer ends at once (paper, App. B.2).
    """

    def __init__(self, answer_end_token_id: int, eos_token_id: int):
        self.answer_end_token_id = answer_end_token_id
        self.eos_token_id = eos_token_id

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        # input_ids: (batch * beams, generated so far); scores: (batch * beams, vocab)
        answer_closed = input_ids[:, -1] == self.answer_end_token_id
        only_eos = torch.full_like(scores, -float("inf"))
        only_eos[:, self.eos_token_id] = 0.0
        return torch.where(answer_closed[:, None], only_eos, scores)


def choose_noun_phrases(
    masked_captions: Sequence[str], candidates: Sequence[Sequence[str]], nlp, batch_size: int = 256
) -> list[str]:
    """For each example, its first candidate that is a noun phrase in the blank, else its first candidate.

    Candidates are parsed lazily, rank by rank: rank r is parsed (all examples in one `nlp.pipe`)
    only for the examples whose ranks 0..r-1 were all rejected, and a candidate equal to an earlier
    one of the same example is not parsed again. Most first beams are noun phrases, so this
    parses little more than one candidate per example.
    """
    if len(masked_captions) != len(candidates):
        raise ValueError(f"Got {len(masked_captions)} masked captions but {len(candidates)} candidate lists.")
    chosen: list[str | None] = [None] * len(candidates)
    rejected: list[set[str]] = [set() for _ in candidates]
    for rank in range(max(map(len, candidates), default=0)):
        pending = [
            i
            for i, ranked in enumerate(candidates)
            if chosen[i] is None and rank < len(ranked) and ranked[rank] not in rejected[i]
        ]
        if not pending:
            continue
        answers = [candidates[i][rank] for i in pending]
        flags = are_noun_phrases([masked_captions[i] for i in pending], answers, nlp, batch_size=batch_size)
        for i, answer, is_noun_phrase in zip(pending, answers, flags):
            if is_noun_phrase:
                chosen[i] = answer
            else:
                rejected[i].add(answer)
    return [answer if answer is not None else ranked[0] for answer, ranked in zip(chosen, candidates)]
