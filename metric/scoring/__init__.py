"""Scoring predictions files on a FIBER split, what `fiberbench evaluate` and the leaderboard share: `predictions`
reads a file and joins it strictly to the split's blanks, `results` scores it through the metric's functions
(intervals, comparisons, baselines), `report` writes results.md and `figure` by_category.png."""
