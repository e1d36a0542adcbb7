"""The `fiber_metric` evaluate module (this folder is uploadable to the Hub as it is)."""
