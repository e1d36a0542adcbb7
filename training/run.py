"""One run of `training/train.py`: data, model or baseline, training, evaluation, outputs, push (paper §4-5, App. B).

`train_and_evaluate(args, output)` takes the arguments that `fiberbench.training.arguments.parse_args`
has checked and the output folder that `fiberbench.training.outputs.check_output_dir` has checked,
and runs everything that needs torch, transformers, datasets and Accelerate; the script itself
(`training/train.py`) loads none of them before its arguments, the paths they name, the launch and
the output folder are checked. With --push_to_hub the model goes to the Hub at the end, and with
--hub_strategy also at each save, with the checkpoints, in the background (`HubPusher`);
--resume_from_checkpoint may name a checkpoint on the Hub (`download_checkpoint`).

The run's neighbours: `launch.py` (the Accelerator and the launched processes), `context.py`
(what the stages share), `loop.py` (the training loop), `saving.py` (the model folder, its card,
results.json, resuming), `checkpointing.py` (checkpoint folders), `hub_checkpoints.py` (the Hub's
side of pushes and resumes), `evaluation.py` (decoding and scoring a split).
"""

import argparse
import os
from pathlib import Path

import datasets
import transformers
from accelerate import Accelerator
from accelerate.logging import get_logger
from accelerate.utils import set_seed

from fiberbench.cli import default_num_workers
from fiberbench.data.provenance import is_synthetic
from fiberbench.errors import DataError, alike_on_every_process
from fiberbench.metric.baselines import most_frequent_answer
from fiberbench.modeling.noun_phrases import load_spacy_pipeline
from fiberbench.training.arguments import hub_checkpoint, hub_repo_id, training_settings
from fiberbench.training.checkpointing import check_checkpoint
from fiberbench.training.context import Run, evaluated_splits
from fiberbench.training.evaluation import Evaluator, load_metric, score
from fiberbench.training.hub_checkpoints import (
    DownloadedCheckpoint,
    HubPusher,
    check_downloaded,
    download_checkpoint,
    remove_stale_pushes,
)
from fiberbench.training.inputs import default_config_name, load_splits
from fiberbench.training.launch import make_accelerator, setup_logging
from fiberbench.training.loop import prepare_for_evaluation, train
from fiberbench.training.models import build_model, checkpoint_config, loading_options, resolve_fusion
from fiberbench.training.outputs import MODEL_FOLDER, RunFolder
from fiberbench.training.saving import final_saved_at, make_results, save_model, write_final_outputs, write_model_card

logger = get_logger(__name__)

# How many blanks the reloaded model fills at the end of a run, to show it works as a user would load it.
NUM_FILLED_EXAMPLES = 3


def train_and_evaluate(args: argparse.Namespace, output: RunFolder) -> None:
    """The whole run into `output` (its --output_dir, checked by `check_output_dir`): the other checks, data, model
    or baseline, training, evaluation, outputs, push."""
    source = hub_checkpoint(args)
    with alike_on_every_process():
        options = loading_options(args.model_name_or_path) if args.model_name_or_path else {}
        # Every process downloads (the cache shares the files of one machine), before the processes form a group:
        # a failed download stops each one, never a group waiting for another.
        downloaded = download_checkpoint(source, trust_checkpoint=args.trust_checkpoint) if source else None
        accelerator = make_accelerator(args)
        setup_logging(accelerator)
    with output.open(accelerator):
        run_with_the_folder(args, accelerator, output, options, downloaded)


def run_with_the_folder(
    args: argparse.Namespace,
    accelerator: Accelerator,
    output: RunFolder,
    options: dict,
    downloaded: DownloadedCheckpoint | None = None,
) -> None:
    """The run, once its output folder is checked and locked: data, model or baseline, training, evaluation.

    `downloaded`: the Hub checkpoint of --resume_from_checkpoint, in this machine's cache.
    """
    set_seed(args.seed)

    with alike_on_every_process():  # every process reads the same data and checkpoint
        fusion = resolve_fusion(args, options)
        if args.dataset_config_name is None:
            checkpoint = checkpoint_config(args, options) if fusion != "none" else None
            args.dataset_config_name = default_config_name(fusion, checkpoint.video_features_name if checkpoint else None)
        with accelerator.main_process_first():
            splits = load_splits(args.dataset_name, args.dataset_config_name, fusion)
        needed = (["train"] if args.do_train or args.baseline else []) + evaluated_splits(args)
        missing = [name for name in needed if name not in splits]
        if missing:
            raise DataError(f"The dataset has no {' or '.join(missing)} split (it has: {', '.join(splits)}).")
        resume_folder, resumed_from = None, None
        if args.resume_from_checkpoint:
            resume_folder = Path(args.resume_from_checkpoint)
            resumed_from = {"checkpoint": args.resume_from_checkpoint}
            if downloaded is not None:
                resume_folder, resumed_from = downloaded.path, resumed_from | {"commit": downloaded.commit}
                check_downloaded(accelerator, downloaded)
            check_checkpoint(
                accelerator, resume_folder, settings=training_settings(args), trust_checkpoint=args.trust_checkpoint
            )
    run = Run(
        args=args,
        accelerator=accelerator,
        output=output,
        splits=splits,
        fusion=fusion,
        synthetic=is_synthetic(args.dataset_name),
        num_workers=args.dataloader_num_workers
        if args.dataloader_num_workers is not None
        else default_num_workers(int(os.environ.get("LOCAL_WORLD_SIZE", accelerator.num_processes))),
        checkpoint=resume_folder,
        resumed_from=resumed_from,
    )
    logger.info(describe_run(run))
    forkserver = " (started from a forkserver: this process pushes while it trains)" if run.worker_context else ""
    logger.info(
        f"Process {accelerator.process_index} of {accelerator.num_processes} on {accelerator.device} "
        f"({accelerator.distributed_type.value}), {run.num_workers} data loader workers{forkserver}",
        main_process_only=False,
    )
    try:
        if args.baseline is not None:
            run_baseline(run)
        else:
            run_model(run, options)
        accelerator.wait_for_everyone()
        accelerator.end_training()
        if accelerator.is_main_process:
            output.finish()
        # After the last collective call: the other processes never wait for the push.
        if run.hub is not None:
            url = run.hub.push_final()
            logger.info(f"Pushed the {len(output.files_of(MODEL_FOLDER))} files this run wrote in model/ to {url}")
    finally:
        if run.hub is not None:
            run.hub.close()


def describe_run(run: Run) -> str:
    """The first log line: what is trained (or run) on what, and whether the data is SYNTHETIC."""
    args = run.args
    if args.baseline is not None:
        what = f"the {args.baseline.replace('_', '-')} baseline"
    elif args.model_name_or_path is None:
        what = f"a tiny {run.fusion}-fusion model built from the tokenizer shipped with the package"
    else:
        what = f"{args.model_name_or_path} ({run.fusion}-fusion)"
    if args.dataset_name is None:
        data = "the bundled SYNTHETIC sample"
    else:
        data = args.dataset_name + (" (SYNTHETIC: built from the bundled sample)" if run.synthetic else "")
    if args.sample_demo:
        return (
            f"Main job: no --model_name_or_path and no --dataset_name given, so {what} on {data}, offline, "
            f"with the settings of training/configs/sample_demo.yaml; results in {args.output_dir}"
        )
    action = "Training and evaluating" if args.do_train and args.baseline is None else "Evaluating"
    return f"{action} {what} on {data}; results in {args.output_dir}"


def run_baseline(run: Run) -> None:
    """The most-frequent-answer baseline: the same outputs as a model run, from the main process."""
    if not run.accelerator.is_main_process:
        return
    run.output.claim()
    answer = most_frequent_answer(run.splits["train"]["label"])
    logger.info(f"Most frequent training answer: {answer!r}")
    metric = load_metric()
    scores, records = {}, []
    for name in run.evaluated_splits:
        split = run.splits[name]
        outputs = [{"index": i, "prediction": answer, "candidates": [answer]} for i in range(len(split))]
        scores[name], split_records = score(metric, split, outputs, name)
        records += split_records
    write_final_outputs(run, make_results(run, answer=answer, **scores), records)


def run_model(run: Run, options: dict) -> None:
    """Train (unless --no-do_train) and evaluate a model; save, describe and push it."""
    args, accelerator = run.args, run.accelerator
    model, processor = build_model(args, run.fusion, options, run.video)
    num_beams = model.generation_config.num_beams
    nlp = load_spacy_pipeline(args.spacy_model) if args.only_noun_phrases else None
    evaluator = Evaluator(
        accelerator,
        processor,
        {name: run.splits[name] for name in run.evaluated_splits},
        with_video=run.with_video,
        batch_size=args.per_device_eval_batch_size,
        num_beams=num_beams,
        only_noun_phrases=args.only_noun_phrases,
        nlp=nlp,
        num_workers=run.num_workers,
        worker_context=run.worker_context,
    )
    if accelerator.is_main_process:
        run.output.claim()
        remove_stale_pushes(run.output)
        if args.push_to_hub:
            run.hub = HubPusher(run.output, hub_repo_id(args), args.hub_strategy, token=args.hub_token)
    accelerator.wait_for_everyone()
    training = None
    if args.do_train:
        model, training = train(run, model, processor, evaluator)
    else:
        model = prepare_for_evaluation(accelerator, model)

    scores, records = {}, []
    for name in run.evaluated_splits:
        scores[name], split_records = evaluator(model, name, f"Evaluating ({name})")
        records += split_records
    if args.do_train and training["best"] is None:
        save_model(run, model, processor)
    if not accelerator.is_main_process:
        return
    results = make_results(run, num_beams=num_beams, **scores, **({"training": training} if training else {}))
    write_final_outputs(run, results, records)
    if args.do_train:
        split = next((name for name in ("test", "validation") if name in results), None)
        write_model_card(
            run,
            results[split] if split else {},
            split,
            final_saved_at(training, results.get("validation")),
            num_beams,
        )
        shown = run.splits[run.evaluated_splits[-1]] if run.evaluated_splits else run.splits["train"]
        print(fill_with_saved_model(run.output.path / MODEL_FOLDER, shown, run.with_video, nlp), flush=True)


def fill_with_saved_model(folder: Path, split: datasets.Dataset, with_video: bool, nlp) -> str:
    """Reload the saved model from disk, as a user would, and fill a few blanks of `split`."""
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder)
    processor = transformers.AutoProcessor.from_pretrained(folder)
    rows = split.select(range(min(NUM_FILLED_EXAMPLES, len(split))))
    answers = model.fill_blanks(
        processor,
        rows["masked_caption"],
        video_features=rows.with_format("numpy")["video_features"] if with_video else None,
        only_noun_phrases=nlp is not None,
        nlp=nlp,
    )
    lines = [f"Reloaded {folder} and filled {len(answers)} blanks:"]
    lines += [
        f"  {caption}  ->  {answer!r}  (label: {label!r})"
        for caption, answer, label in zip(rows["masked_caption"], answers, rows["label"])
    ]
    return "\n".join(lines)
