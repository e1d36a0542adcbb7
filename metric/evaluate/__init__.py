"""`fiberbench evaluate`: the command that scores predictions files on a FIBER split (`command`), and writes a
system's scores into its model card's `model-index` (`model_index`). The scoring itself is `fiberbench.metric.scoring`."""
