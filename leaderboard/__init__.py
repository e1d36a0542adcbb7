"""The FIBER leaderboard: a Gradio Space shaped like the Hub's leaderboard template (`app.py` over `src/`: `populate`
reads the store and computes the board with `fiberbench evaluate`'s code, `display` shows it, `submission` checks,
scores and stores what a person sends), and `command`, `fiberbench leaderboard`, which builds (and pushes) it."""
