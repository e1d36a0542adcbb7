"""`fiberbench predict` (`command`): a Hub model's answers on a FIBER split, with the prompt (`prompts`), the answer
reader (`replies`) and the answer choice (`answers`) it shares with the lmms-eval task and training."""
