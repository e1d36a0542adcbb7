"""`fiberbench predict`: run a Hub model (seq2seq LM, causal LM, FIBER model, video-language model) on FIBER.

The command (`command`) writes a predictions file in the format that `fiberbench evaluate`
scores. Its parts, in the order a run meets them:

- `arguments` (the flags and their checks) and `settings` (`PredictSettings`, what every part reads);
- `kinds`, the registry of the kinds of model and the checks that need the model's config, with
  the predictors of each kind in `predictors` (FIBER, seq2seq), `prompted` (causal) and `video`
  (video-language models), and `chat_templates` (a model's chat template, run bounded);
- `clips` (the dataset split and the clips' videos), `record` (what a run records and resumes
  from), `loading` (the data loader making each batch's inputs), `answering` (each clip's answer
  from beams or replies) and `outputs` (the resumable predictions file);
- `reread`: a predictions file's replies read again, without the model.

What other commands share with it is in the core: `fiberbench.models` (a model's config and
fingerprints), `fiberbench.prompts`, `fiberbench.replies` (the answer reader) and
`fiberbench.videos` (finding a clip's video and the one frame-sampling rule).
"""
