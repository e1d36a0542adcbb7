"""`fiberbench predict`: run a Hub model (seq2seq LM, causal LM, FIBER model, video-language model) on FIBER.

The command (`fiberbench.predict.command`) writes a predictions file in the format that
`fiberbench evaluate` scores; the modules beside it hold its parts: `kinds` (which kind a model is
and how each kind answers), `reread` (a predictions file's replies read again) and `outputs` (the
resumable predictions file). What other commands share with it is in the core: `fiberbench.prompts`
(the prompt of language models), `fiberbench.replies` (the answer reader) and `fiberbench.videos`
(finding and sampling a clip's video).
"""
