"""Decoding: the paper's generation settings, the end-of-answer rule, the lazy noun-phrase choice and fill_blanks."""

import pytest
import torch

from fiberbench.modeling import FUSIONS, FiberT5ForConditionalGeneration, build_tiny_config
from fiberbench.modeling.decoding import EosAfterAnswerLogitsProcessor, choose_noun_phrases
from fiberbench.modeling.noun_phrases import are_noun_phrases


@pytest.mark.parametrize("fusion, num_beams", list(zip(FUSIONS, (2, 4, 8))))
def test_the_generation_config_holds_the_paper_settings(make_model, fusion, num_beams):
    generation = make_model(fusion).generation_config
    assert generation.num_beams == num_beams
    assert (generation.max_new_tokens, generation.no_repeat_ngram_size, generation.early_stopping) == (10, 2, True)
    assert generation.decoder_start_token_id == 0 and generation.eos_token_id == 1


def test_only_eos_may_follow_the_answer_end():
    rule = EosAfterAnswerLogitsProcessor(answer_end_token_id=7, eos_token_id=1)
    scores = torch.randn(2, 10)
    processed = rule(torch.tensor([[0, 5, 7], [0, 7, 5]]), scores.clone())
    assert processed[0, 1] == 0 and torch.isinf(processed[0]).sum() == 9
    assert torch.equal(processed[1], scores[1])


CAPTIONS = ["A man plays _____ on a stage.", "A woman is cooking _____ in the kitchen.", "The dog runs _____."]
CANDIDATES = [
    ["the guitar", "plays", "on"],  # a noun phrase first
    ["in", "in", "dinner", "pasta"],  # a preposition (twice), then a noun phrase
    ["quickly", "very quickly", "and", "quickly"],  # no noun phrase at all
]


def test_the_first_noun_phrase_is_chosen_parsing_only_what_is_needed(counting_nlp):
    assert choose_noun_phrases(CAPTIONS, CANDIDATES, counting_nlp) == ["the guitar", "dinner", "quickly"]
    # 1 + 2 + 3 distinct candidates, against 11 for parsing every beam; one `pipe` per rank that had any.
    assert counting_nlp.parsed == 6
    assert counting_nlp.calls == 3


def lazy_parse_count(masked_captions, candidates, nlp):
    """How many parses the lazy choice needs: each example's distinct candidates up to its first noun phrase."""
    needed = 0
    for caption, ranked in zip(masked_captions, candidates):
        flags = are_noun_phrases([caption] * len(ranked), ranked, nlp)
        needed += flags.index(True) + 1 if True in flags else len(ranked)
    return needed


def test_fill_blanks(make_model, processor, sample_clips, counting_nlp, nlp):
    model = make_model("early")
    captions, videos = [clip["masked_caption"] for clip in sample_clips], [clip["video"] for clip in sample_clips]
    filled = model.fill_blanks(processor, captions, video_features=videos, nlp=counting_nlp, return_candidates=True)
    assert len(filled) == len(captions)
    answers, candidates = [answer for answer, _ in filled], [ranked for _, ranked in filled]
    for answer, ranked in filled:
        assert 1 <= len(ranked) <= 4 and len(set(ranked)) == len(ranked) and answer in ranked
    assert answers == choose_noun_phrases(captions, candidates, nlp)
    assert counting_nlp.parsed == lazy_parse_count(captions, candidates, nlp) <= sum(map(len, candidates))

    one_at_a_time = model.fill_blanks(
        processor, captions, video_features=videos, nlp=nlp, return_candidates=True, batch_size=1
    )
    assert one_at_a_time == filled
    first_beams = model.fill_blanks(processor, captions, video_features=videos, only_noun_phrases=False)
    assert first_beams == [ranked[0] for ranked in candidates]
    two_beams = model.fill_blanks(processor, captions, videos, num_beams=2, return_candidates=True, nlp=nlp)
    assert all(len(ranked) <= 2 for _, ranked in two_beams)


def test_fill_blanks_is_deterministic_and_restores_the_mode(tokenizer, processor, sample_clips):
    """A freshly built model is in train mode (dropout on): fill_blanks still answers the same, and leaves it so."""
    torch.manual_seed(0)
    model = FiberT5ForConditionalGeneration(build_tiny_config(tokenizer, "early"))
    assert model.training
    captions, videos = [clip["masked_caption"] for clip in sample_clips], [clip["video"] for clip in sample_clips]
    calls = [
        model.fill_blanks(processor, captions, video_features=videos, only_noun_phrases=False, return_candidates=True)
        for _ in range(3)
    ]
    assert calls[0] == calls[1] == calls[2]
    assert model.training and all(module.training for module in model.modules())
    assert calls[0] == model.eval().fill_blanks(
        processor, captions, video_features=videos, only_noun_phrases=False, return_candidates=True
    )
    assert not model.training
