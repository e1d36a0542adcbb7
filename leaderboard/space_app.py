"""The FIBER leaderboard Space: the board of the results that leaderboard.json names, and a Submit tab.

`fiberbench leaderboard` writes this file as the Space's app.py; the page itself is
`fiberbench.leaderboard.app`, installed from requirements.txt, so the Space scores with the code
of `fiberbench evaluate` of the release that built it.
"""

from pathlib import Path

from fiberbench.leaderboard.app import launch

if __name__ == "__main__":
    launch(Path(__file__).resolve().parent)
