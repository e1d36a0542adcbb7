"""Decoding: the paper's generation settings, the end-of-answer rule, the lazy noun-phrase choice and fill_blanks."""

import pytest
import torch

from fiberbench.modeling import FUSIONS
from fiberbench.modeling.decoding import EosAfterAnswerLogitsProcessor, choose_noun_phrases
from fiberbench.modeling.noun_phrases import are_noun_phrases


@pytest.mark.parametrize("fusion, num_beams", list(zip(FUSIONS, (2, 4, 8))))
def test_the_generation_config_holds_the_paper_settings(make_model, fusion, num_beams):
    generation = make_model(fusion).generation_config
    assert (generation.num_beams, generation.max_new_tokens, generation.no_repeat_ngram_size) == (num_beams, 10, 2)
    assert generation.early_stopping is True and (generation.decoder_start_token_id, generation.eos_token_id) == (0, 1)


def test_only_eos_may_follow_the_answer_end():
    scores = torch.randn(2, 10)
    processed = EosAfterAnswerLogitsProcessor(answer_end_token_id=7, eos_token_id=1)(
        torch.tensor([[0, 5, 7], [0, 7, 5]]), scores.clone())
    assert processed[0, 1] == 0 and torch.isinf(processed[0]).sum() == 9 and torch.equal(processed[1], scores[1])


def test_the_first_noun_phrase_is_chosen_parsing_only_what_is_needed(counting_nlp):
    captions = ["A man plays _____ on a stage.", "A woman is cooking _____ in the kitchen.", "The dog runs _____."]
    candidates = [
        ["the guitar", "plays", "on"],  # a noun phrase first
        ["in", "in", "dinner", "pasta"],  # a preposition (twice), then a noun phrase
        ["quickly", "very quickly", "and", "quickly"],  # no noun phrase at all
    ]
    assert choose_noun_phrases(captions, candidates, counting_nlp) == ["the guitar", "dinner", "quickly"]
    # 1 + 2 + 3 distinct candidates, against 11 for parsing every beam; one `pipe` per rank that had any.
    assert (counting_nlp.parsed, counting_nlp.calls) == (6, 3)


def test_fill_blanks(make_model, processor, sample_clips, counting_nlp, nlp):
    model = make_model("early").train()  # dropout on: fill_blanks answers in eval mode all the same, and gives it back
    captions, videos = [clip["masked_caption"] for clip in sample_clips], [clip["video"] for clip in sample_clips]
    filled = model.fill_blanks(processor, captions, video_features=videos, nlp=counting_nlp, return_candidates=True)
    assert model.training and all(module.training for module in model.modules())
    answers, candidates = [answer for answer, _ in filled], [ranked for _, ranked in filled]
    assert len(filled) == len(captions) and answers == choose_noun_phrases(captions, candidates, nlp)
    assert all(1 <= len(ranked) <= 4 and len(set(ranked)) == len(ranked) and answer in ranked
               for answer, ranked in filled)
    needed = 0  # parsed lazily: each example's distinct candidates up to its first noun phrase
    for caption, ranked in zip(captions, candidates):
        flags = are_noun_phrases([caption] * len(ranked), ranked, nlp)
        needed += flags.index(True) + 1 if True in flags else len(ranked)
    assert counting_nlp.parsed == needed
    assert model.fill_blanks(processor, captions, videos, nlp=nlp, return_candidates=True, batch_size=1) == filled
    assert model.eval().fill_blanks(processor, captions, videos, nlp=nlp, return_candidates=True) == filled
    assert model.fill_blanks(processor, captions, videos, only_noun_phrases=False) == [r[0] for r in candidates]
    two_beams = model.fill_blanks(processor, captions, videos, num_beams=2, return_candidates=True, nlp=nlp)
    assert all(len(ranked) <= 2 for _, ranked in two_beams) and not model.training
