"""`fiberbench predict`: run a Hub model (seq2seq LM, causal LM, FIBER model, video-language model) on FIBER.

The command (`command`) writes a predictions file in the format that `fiberbench evaluate`
scores, or with --reread reads a file's kept replies again, without the model (its other flow).
Its parts, in the order a run meets them:

- `arguments` (the flags, as argparse declares them, each value that can be judged alone checked as
  it is parsed) and `settings` (`PredictSettings`, what every part reads: the flags checked
  together, and what a run records of them and resumes from);
- `kinds`, the registry of the kinds of model and the checks that need the model's config, with
  the predictors of each kind in `predictors` (FIBER, seq2seq), `prompted` (causal) and `video`
  (video-language models: their clips' videos found and checked), and `chat_templates` (a model's
  chat template, run bounded); each predictor prepares what its kind reads beyond the dataset's
  rows before any generation (`prepare_clips`);
- `clips` (the dataset split, and the data loader making each batch's inputs) and `outputs` (the
  resumable predictions file).

What other commands share with it is in the core: `fiberbench.models` (a model's config and
fingerprints), `fiberbench.predict.prompts`, `fiberbench.predict.answers` (each clip's answer from beams or
replies), `fiberbench.predict.replies` (the answer reader) and `fiberbench.videos` (finding a clip's video
and the one frame-sampling rule).
"""
