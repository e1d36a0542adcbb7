"""The predictions file every command shares: what `fiberbench predict` writes and `fiberbench evaluate` reads.

A predictions file has one row per blank, named by its clip (`KEY_FIELDS`, the same fields as the
dataset's), with the system's answer in `prediction` and, optionally, its ranked `candidates`.
"""

# The fields that name a blank's clip, in the dataset and in every predictions file.
KEY_FIELDS = ("video_id", "video_start_time", "video_end_time")
