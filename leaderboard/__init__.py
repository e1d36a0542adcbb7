"""The FIBER leaderboard: a Gradio Space built from a store of results (`fiberbench leaderboard`).

`store` keeps the submissions (a Hub dataset repo or a local folder), `board` scores them with
`fiberbench evaluate`'s code (`fiberbench.metric.scoring`), `ranks` adds rank intervals and Holm's
correction, `display` turns a board into the page's table, matrix and chart, `submission` checks
and stores what a person submits, `app` is the Gradio page, `space` writes the Space folder and
`command` is the CLI.
"""
