"""Scoring predictions files on a FIBER split: what `fiberbench evaluate` and the leaderboard share.

`split` loads the blanks and joins each predictions file to them, `results` computes every score,
interval and comparison through the metric's functions, `report` writes results.md and `figure`
by_category.png. The command itself (flags, output folder) is `fiberbench.metric.evaluate`.
"""
