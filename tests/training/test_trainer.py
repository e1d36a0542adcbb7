"""The Trainer path: the real Seq2SeqTrainer trains a FIBER model on the sample and scores it through fiber_metric."""

import pytest
import torch
from transformers import AutoTokenizer, Seq2SeqTrainingArguments

from fiberbench.data import load_sample
from fiberbench.metric import references_from_example
from fiberbench.modeling import (
    SAMPLE_TOKENIZER_PATH,
    FiberProcessor,
    FiberT5ForConditionalGeneration,
    build_tiny_config,
)
from fiberbench.training.evaluation import load_metric
from fiberbench.training.trainer import FiberSeq2SeqTrainer

from .sample_trainer import sample_demo_trainer

pytestmark = pytest.mark.slow


@pytest.fixture
def one_thread():
    """One intra-op thread, as `accelerate launch` gives each process: with a data loader worker beside
    it, two threads on a busy 2-core machine made this test 25x slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_seq2seq_trainer_trains_and_evaluates_like_fill_blanks(tmp_path, nlp, one_thread):
    trainer = sample_demo_trainer(
        tmp_path / "trainer", metrics={"nlp": nlp}, num_train_epochs=4, save_strategy="no", dataloader_num_workers=1
    )
    model, processor, fiber = trainer.model, trainer.processing_class, load_sample("i3d")
    trainer.train()
    evaluations = [record for record in trainer.state.log_history if "eval_f1" in record]
    assert len(evaluations) == 4 and evaluations[-1]["eval_f1"] > evaluations[0]["eval_f1"]
    metrics = trainer.evaluate()
    assert metrics["eval_f1"] > 15, metrics  # learnt from the video: text alone stays near 5 on the sample

    # The Trainer's decoding and scoring are the model's own `fill_blanks` and fiber_metric.
    validation = fiber["validation"]
    answers = model.eval().fill_blanks(
        processor,
        validation["masked_caption"],
        video_features=validation.with_format("numpy")["video_features"],
        nlp=nlp,
    )
    expected = load_metric().compute(
        predictions=answers, references=[references_from_example(row) for row in validation]
    )
    assert metrics["eval_exact_match"] == pytest.approx(expected["exact_match"])
    assert metrics["eval_f1"] == pytest.approx(expected["f1"])


def test_the_trainer_refuses_to_drop_the_text_columns(tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH)
    model = FiberT5ForConditionalGeneration(build_tiny_config(tokenizer, "none"))
    arguments = Seq2SeqTrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[])
    with pytest.raises(ValueError, match="remove_unused_columns=False"):
        FiberSeq2SeqTrainer(model=model, args=arguments, processing_class=FiberProcessor(tokenizer))


def test_the_trainer_holds_its_output_folders_lock(tmp_path):
    """A train.py run (or another trainer) writing the folder, spelt another way, stops the trainer before it trains."""
    from fiberbench.ownership import OutputLock, OutputLockedError

    tokenizer = AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH)
    model = FiberT5ForConditionalGeneration(build_tiny_config(tokenizer, "none"))
    (tmp_path / "sub").mkdir()
    arguments = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path / "sub" / ".." / "trainer"), use_cpu=True, report_to=[], remove_unused_columns=False
    )
    trainer = FiberSeq2SeqTrainer(model=model, args=arguments, processing_class=FiberProcessor(tokenizer))
    with OutputLock(tmp_path / "trainer", "training/train.py", "--output_dir"):
        with pytest.raises(OutputLockedError, match=r"trainer is being written by another run \(training/train.py, PID"):
            trainer.train()
    assert not any((tmp_path / "trainer").glob("*"))  # nothing trained, nothing saved
