"""Blank decoding as in the FIBER paper (App. B.2): generation settings, end-of-answer rule, noun-phrase choice."""

from collections.abc import Sequence

import torch
from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList

from .noun_phrases import are_noun_phrases

# Beam sizes of the paper's best runs (App. B.2): fine-tuned text-only T5 2, T5 + I3D 4, late fusion 8;
# T5 zero-shot (not trained on FIBER) also 8.
PAPER_NUM_BEAMS = {"none": 2, "early": 4, "late": 8}
ZERO_SHOT_NUM_BEAMS = 8
# The rest of the paper's beam search: at most 10 new tokens, early stopping, no repeated bigrams.
PAPER_DECODING = {"max_new_tokens": 10, "early_stopping": True, "no_repeat_ngram_size": 2}


def paper_generation_config(config) -> GenerationConfig:
    """The paper's decoding settings for a model with this config: beams by fusion and `PAPER_DECODING`;
    special tokens from the config."""
    generation_config = GenerationConfig.from_model_config(config)
    generation_config.update(num_beams=PAPER_NUM_BEAMS[config.fusion], **PAPER_DECODING)
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


def generate_candidates(model, processor, inputs, num_beams: int | None = None, **generate_kwargs) -> list[list[str]]:
    """One batch through `model.generate` in the paper's format: each example's ranked, deduplicated beam answers.

    `processor` is a `FiberProcessor` (the blank as `<extra_id_0>`, answers read between the
    sentinels) and `inputs` the batch it made (`processor(masked_captions, video_features=...)`,
    on any device: made apart from the model, in a data loader's worker say); `model` any seq2seq
    model that takes them: a FIBER model, or a T5-family model zero-shot. `num_beams` defaults to
    the model's generation config; `generate_kwargs` go to `generate` (e.g. `max_new_tokens`).
    """
    num_beams = num_beams or model.generation_config.num_beams
    end_rule = LogitsProcessorList(
        [EosAfterAnswerLogitsProcessor(processor.answer_end_token_id, processor.tokenizer.eos_token_id)]
    )
    sequences = model.generate(
        **inputs.to(model.device, non_blocking=True),  # from a pinned batch, the copy to a GPU does not block
        num_beams=num_beams,
        num_return_sequences=num_beams,
        logits_processor=end_rule,
        **generate_kwargs,
    )
    return rank_beams(processor.decode_answers(sequences), num_beams)


def rank_beams(answers: Sequence[str], num_beams: int) -> list[list[str]]:
    """`num_beams` answers per example, best first, in a flat list -> each example's distinct answers in rank order."""
    return [list(dict.fromkeys(answers[i : i + num_beams])) for i in range(0, len(answers), num_beams)]


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
