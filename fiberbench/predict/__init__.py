"""`fiberbench predict`: run a Hub model (seq2seq LM, causal LM, FIBER model, video-language model) on FIBER.

The command (`fiberbench.predict.command`) writes a predictions file in the format that
`fiberbench evaluate` scores; the modules beside it hold its parts: `kinds` (which kind a model is
and how each kind answers), `prompts` (the prompt of language models), `replies` (the answer
reader: the answer in a language model's reply), `reread` (a predictions file's replies read again),
`videos` (finding and sampling a clip's video) and `outputs` (the resumable predictions file).
"""
