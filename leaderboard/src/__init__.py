"""The leaderboard Space's code under its app.py: `populate` (the store and the board), `display`, `submission`."""
