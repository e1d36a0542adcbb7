"""One owner for every output: which command's run wrote it, whether that run finished, and who writes it now.

Every command that writes (build-dataset, blank, answers, agreement, stats, hit-inputs, evaluate,
predict, extract-features, train.py) declares each of its outputs as an `Output` and writes it
inside `Output.open`, the one sequence: check, lock, check again under the lock, claim, the run,
`complete`. Commands keep only their own content (predict's settings, a folder's entries).

- One spelling: an output's path is made canonical (`canonical_path`: `..` and the links among its
  parent folders resolved) before anything is named after it, so `run`, `run/step_4/..` and a
  link to `run`'s parent are one output, one lock and one record.
- `Output.check`, before any work: never the current directory, the home directory, the root or a
  folder above one of them; never an input (a hard link of one included), a folder above an input
  or a path inside an input folder; never a symbolic link, a FIFO or a hard link where the output
  or its record goes. An existing output is replaced only with the command's overwrite flag, and
  only when this command wrote it (its record says so) and nothing else has been put there; what
  the command did not write is never replaced or deleted, flag or no flag.
- The lock, `OutputLock`, for the run's whole duration: `.NAME.lock` beside the output names the
  host and PID of the run that holds it. It is created new, following no link, and held with an
  advisory `flock` (`flock.py`), which the kernel releases when its process ends however it ends, so
  the lock file of a killed run (anyone's) is removed and made anew by the next run; a second run
  into the same output while the first goes on is refused in one line naming the first. What stands
  at the lock's path and is not a lock file (a link, a FIFO, a hard link, another file) is one line.
- The record, `OutputRecord` (`records.py`): `X.metadata.json` beside a file `X.ext`,
  `fiberbench_output.json` inside a folder. It names the command that wrote the output, the package
  version, host, PID and times, the files a folder's run wrote (entry by entry, each folder entry
  with its files), the command's own sections (e.g. predict's settings, and `arguments_of` a
  command's flags) and the state: `running` from the moment a run starts writing, `complete` once
  it is done. A killed run leaves `running`: its output says that it is unfinished. Replacing an
  earlier run removes the files its record lists and nothing else: a user's file in one of its
  folders stays, named in a one-line notice.
- A run's hidden working folder (predict's `.NAME.parts`) is `working_folder`: made with `mkdir`,
  never a link or another user's folder.
- A cache entry that every run shares is built once, under its own lock (`shared_build`, `builds.py`).

Files and folders themselves are written atomically through `fiberbench.files`.
"""

from .builds import SHARED_BUILD_WAIT_SECONDS, shared_build
from .output import (
    Output,
    OutputLock,
    OutputLockedError,
    acquire_on_main,
    arguments_of,
    canonical_path,
    check_all,
    check_not_protected,
    open_all,
    working_folder,
)
from .records import (
    COMPLETE,
    FOLDER_RECORD,
    RECORD_SUFFIX,
    RUNNING,
    OutputRecord,
    differences,
    files_in,
    listing,
    names_pattern,
    record_path,
    remove_entries,
    unlisted_files,
)

__all__ = [
    "COMPLETE",
    "FOLDER_RECORD",
    "RECORD_SUFFIX",
    "RUNNING",
    "SHARED_BUILD_WAIT_SECONDS",
    "Output",
    "OutputLock",
    "OutputLockedError",
    "OutputRecord",
    "acquire_on_main",
    "arguments_of",
    "canonical_path",
    "check_all",
    "check_not_protected",
    "differences",
    "files_in",
    "listing",
    "names_pattern",
    "open_all",
    "record_path",
    "remove_entries",
    "shared_build",
    "unlisted_files",
    "working_folder",
]
