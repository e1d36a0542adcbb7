"""An output of a command's run (`Output`): its one spelling, its lock, and the one sequence that writes it.

`Output.open` is that sequence: check, lock, check again under the lock, claim, the run,
`complete` (see `fiberbench.ownership`). The record it writes is `records.py`'s; the lock file is
`flock.py`'s. A command's flags go into the record through `arguments_of`.
"""

import contextlib
import errno
import functools
import os
import re
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ..errors import UsageError, alike_on_every_process
from ..files import atomic_folder, check_outputs_apart, write_json
from .flock import foreign_kind, in_words, is_at, name_holder, read_holder, try_lock
from .records import (
    COMPLETE,
    FOLDER_RECORD,
    RUNNING,
    OutputRecord,
    is_relative_file,
    listing,
    now,
    record_path,
    remove_entries,
    unlisted_files,
)


def canonical_path(path: str | os.PathLike) -> Path:
    """`path` as one spelling: absolute, with `~`, `..` and the links among its parent folders resolved.

    Two spellings of one output (`run`, `run/step_4/..`, `link_to_parent/run`) are one path, so they
    share one lock and one record. The last name is kept as it is: a link there is the output's
    own, refused by `Output.check`, never followed.
    """
    path = Path(path).expanduser()
    if path.name in ("", ".", ".."):  # `SUB/..`, `.`, `/`: the folder it stands for
        return path.resolve()
    return path.parent.resolve() / path.name


def check_not_protected(flag: str, path: Path) -> None:
    """Refuse an output that is (or is above) the current directory, the home directory, or the root."""
    resolved = path.expanduser().resolve()
    if resolved == Path(resolved.anchor):
        raise UsageError(f"{flag} {path} is the root folder: choose a new folder")
    places = (("the current directory", Path.cwd().resolve()), ("the home directory", Path.home().resolve()))
    for name, place in places:
        if resolved == place or resolved in place.parents:
            raise UsageError(f"{flag} {path} is {name} or a folder above it: choose a new folder")


def working_folder(path: Path, flag: str, output: Path, *, create: bool = True) -> Path:
    """The hidden folder an output's run works in (predict's `.NAME.parts`): a real folder of this user's.

    Made with `mkdir`, which follows no link; one found there is used only when it is a folder (not
    a link to one) owned by this user, else one line names it and nothing is written into it.
    """
    try:
        if not create:
            info = os.lstat(path)
        else:
            os.mkdir(path)
            return path
    except FileNotFoundError:
        return path
    except FileExistsError:
        info = os.lstat(path)
    kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else None if stat.S_ISDIR(info.st_mode) else "not a folder"
    if kind is None and info.st_uid != os.getuid():
        kind = "a folder of another user"
    if kind is not None:
        raise UsageError(
            f"{flag} {output}: its working folder {path} is {kind}; nothing is read from or written into it: "
            "move it away, or choose another output"
        )
    return path


class OutputLockedError(UsageError):
    """Another run holds the output's lock."""


class OutputLock:
    """The exclusive lock of one output, held by one run: `.NAME.lock` beside it, naming host, PID and command.

    The lock file is only ever created new (`O_CREAT | O_EXCL`, which never follows a link), so it
    writes into no file but its own. A lock file whose run has ended (no process holds its `flock`)
    is removed and made anew; what is at the lock's path and is not a lock file of ours (a link, a
    FIFO, a hard link, a file of other content) is one line naming it, and is left as it is.
    """

    def __init__(self, path: Path, command: str, flag: str):
        path = canonical_path(path)
        if not path.name:
            raise UsageError(f"{flag} {path} is the root folder: choose a new folder")
        self.path = path.with_name(f".{path.name}.lock")
        self.output = path
        self.command = command
        self.flag = flag
        self._descriptor: int | None = None
        self._created: Path | None = None  # the first folder the lock had to create, removed again if left empty

    def acquire(self) -> None:
        """Take the lock, or raise `OutputLockedError` naming the run that holds it (`UsageError`: something that is
        not a lock file stands at its path)."""
        missing = [folder for folder in (self.path.parent, *self.path.parent.parents) if not folder.exists()]
        self._created = missing[-1] if missing else None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
            except FileExistsError:
                self._remove_if_ended()
                continue
            # Not taken: another run found the new file, empty, and took it for a dead run's. Not at the path:
            # removed meanwhile by a run that took it for a dead run's. Either way, try again.
            if try_lock(descriptor) and is_at(self.path, descriptor):
                break
            os.close(descriptor)
        name_holder(descriptor, command=self.command)
        self._descriptor = descriptor

    def _not_ours(self, kind: str) -> UsageError:
        return UsageError(
            f"{self.flag} {self.output}: its lock {self.path} is {kind}, not a lock file of fiberbench; nothing was "
            "written through it: move it away, or choose another output"
        )

    def _remove_if_ended(self) -> None:
        """The lock file at the path: `OutputLockedError` when a run holds it; removed when its run has ended."""
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            return
        if (kind := foreign_kind(info)) is not None:
            raise self._not_ours(kind)
        try:
            descriptor = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except (FileNotFoundError, OSError) as error:
            if isinstance(error, FileNotFoundError) or error.errno == errno.ELOOP:
                return  # replaced meanwhile: look again
            raise
        try:
            if os.fstat(descriptor).st_ino != info.st_ino:
                return
            if not try_lock(descriptor):
                raise OutputLockedError(
                    f"{self.flag} {self.output} is being written by another run ({self._holder(descriptor)}, lock "
                    f"{self.path.name}); wait for it to end or choose another output"
                )
            content = os.read(descriptor, 4096)
            if content.strip() and self._holder(descriptor) is None:
                raise self._not_ours("a file of other content")
            # Holding its flock, no other run can take it over meanwhile: the file at the path is this one.
            try:
                os.unlink(self.path)
            except PermissionError as error:
                raise UsageError(
                    f"{self.flag} {self.output}: its lock {self.path} was left by a run that has ended "
                    f"({self._holder(descriptor)}) and cannot be removed from here ({error.strerror}): remove it "
                    "and run again"
                ) from None
        finally:
            os.close(descriptor)

    @staticmethod
    def _holder(descriptor: int) -> str | None:
        """The run a lock file names ('fiberbench predict, PID 12 on host, since ...'); None: not a lock's content."""
        holder = read_holder(descriptor)
        return in_words(holder) if holder is not None and "command" in holder else None

    def release(self) -> None:
        """Remove the lock file (if it is still ours), and the folders the lock created if the run wrote nothing in
        them."""
        if self._descriptor is not None:
            if is_at(self.path, self._descriptor):
                self.path.unlink(missing_ok=True)
            os.close(self._descriptor)
            self._descriptor = None
            folder = self.path.parent
            while self._created is not None and folder != self._created.parent:
                with contextlib.suppress(OSError):  # not empty: the run wrote there
                    folder.rmdir()
                folder = folder.parent

    def __enter__(self) -> "OutputLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def acquire_on_main(lock: OutputLock, accelerator) -> None:
    """Take `lock` on the main process of an Accelerate run; every process raises the same error when it is held.

    The refusal is one line on every process (each prints it once: see `errors.run_reporting_errors`),
    never a crash of the others waiting for the main process.
    """
    from accelerate.utils import broadcast_object_list

    message = [None]
    if accelerator.is_main_process:
        try:
            lock.acquire()
        except UsageError as error:
            message = [str(error)]
    if accelerator.num_processes > 1:
        broadcast_object_list(message)
    if message[0] is not None:
        raise OutputLockedError(message[0])


class Output:
    """One output (a file, or a folder with `folder=True`) of one run of `command`, and the one sequence that writes it.

    Args:
        path: where it is written (any spelling: it is made `canonical_path`).
        command: the command, as records name it: "fiberbench evaluate", "training/train.py".
        flag: the flag that names it, for messages ("--output_dir").
        overwrite: the command's overwrite flag was given.
        overwrite_flag: that flag's name, for messages.
        folder: the output is a folder (else a file).
        entry_names: a folder's entries this command writes (a pattern of names): an entry of
            another name is never replaced, and a record listing one was edited or damaged.
        resume_hint: how to continue the earlier output found there instead of replacing it, for the
            refusal ("--resume_from_checkpoint DIR/step_40 to continue it"); None when it cannot be.
        leaves_others: the command writes a folder entry by entry and never replaces it whole, so
            a user's entries of names it never writes may stay beside its own (training's run
            folder); otherwise a folder holding anything unlisted is refused.
        shared_entries: the folder entries a command adds files to (training's `logs/`): a
            user's file in one stays where it is, named in a notice, when the command replaces
            its own files there; in any other entry it is a refusal.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        command: str,
        flag: str,
        overwrite: bool = False,
        overwrite_flag: str = "--overwrite_output_file",
        folder: bool = False,
        entry_names: re.Pattern | None = None,
        resume_hint: str | None = None,
        leaves_others: bool = False,
        shared_entries: tuple[str, ...] = (),
    ):
        self.given = Path(path)  # as the user spelt it, for messages
        self.path = canonical_path(path)
        self.command = command
        self.flag = flag
        self.overwrite = overwrite
        self.overwrite_flag = overwrite_flag
        self.folder = folder
        self.entry_names = entry_names
        self.resume_hint = resume_hint
        self.leaves_others = leaves_others
        self.shared_entries = shared_entries
        # The root folder has no name to put a record beside: `check` refuses it.
        self.record_path = record_path(self.path, folder) if self.path.name else self.path
        self.record: OutputRecord | None = None  # this run's, once it writes
        self._lock: OutputLock | None = None
        self._sections: dict = {}  # `open`'s, for the default claim
        self._claim_with: Callable[[], None] | None = None  # `open`'s claim, until it is made

    @classmethod
    def output_dir(
        cls, path: str | os.PathLike, *, overwrite: bool, command: str, entry_names: re.Pattern, **options
    ) -> "Output":
        """The output folder of a command that takes `--output_dir` and `--overwrite_output_dir` (evaluate, stats,
        leaderboard, extract-features, training), writing the entries `entry_names` matches; `options` are the
        other arguments of `Output`."""
        return cls(
            path,
            command=command,
            flag="--output_dir",
            overwrite=overwrite,
            overwrite_flag="--overwrite_output_dir",
            folder=True,
            entry_names=entry_names,
            **options,
        )

    @contextlib.contextmanager
    def open(
        self,
        inputs: Iterable[str | os.PathLike | None] = (),
        *,
        resume: bool = False,
        accelerator=None,
        recheck: Callable[[OutputRecord | None], None] | None = None,
        claim: Callable[[OutputRecord | None], None] | None = None,
        defer_claim: bool = False,
        **sections,
    ) -> Iterator["Output"]:
        """The one sequence of every command that writes: check, lock, check again, claim, the run, complete.

        1. `check` (every process): what is there is this command's to replace or resume.
        2. The lock (`OutputLock`), on the main process of an Accelerate run (`accelerator`).
        3. Under the lock, `check` again, and `recheck(previous_record)`, the command's own check
           of what is there (e.g. predict's settings): another run may have ended meanwhile.
        4. `claim(previous_record)`, on the main process: by default a file's record says `running`
           (with `sections`), a folder written entry by entry (`leaves_others`) loses the files the
           earlier run's record lists when it is replaced; a folder replaced whole is claimed
           when `atomic_folder` publishes it. With `defer_claim`, the command claims (`Output.claim`)
           when it starts writing, once what it loads has loaded (training: nothing is written
           before the data and the model are read).
        5. The block: the command writes.
        6. On success the record says `complete` (if the command has not said so with its own
           sections); on an exception a file's record is put back as it was (its file is
           written atomically), a folder's stays `running`, as after a kill. The lock is released.
        """
        main = accelerator is None or accelerator.is_main_process
        many = accelerator is not None and accelerator.num_processes > 1
        with alike_on_every_process():  # the same on every process: said once, by the main one
            self.check(inputs, resume=resume)
            lock = self.lock()
            if accelerator is None:
                lock.acquire()
            else:
                acquire_on_main(lock, accelerator)
        # A file's record, put back if the run fails (with the default claim: a command's own keeps its record).
        restores = main and not self.folder and claim is None
        before = self.record_path.read_bytes() if restores and self.record_path.is_file() else None
        self._sections = sections
        try:
            with alike_on_every_process():
                previous = self.check(inputs, resume=resume)
                if recheck is not None:
                    recheck(previous)
            if many:
                accelerator.wait_for_everyone()  # every process has checked before anything changes
            self._claim_with = functools.partial(claim or self._claim, previous)
            if not defer_claim:
                if main:
                    self.claim()
                if many:
                    accelerator.wait_for_everyone()
            try:
                yield self
            except BaseException:
                if restores:
                    self._put_back(before)
                raise
            if main and self.record is not None and self.record.state != COMPLETE:
                self.write_record(COMPLETE)
        finally:
            lock.release()

    def claim(self) -> None:
        """Start writing (in `open`, on the main process): `open`'s claim, once."""
        claim, self._claim_with = self._claim_with, None
        if claim is None:
            raise RuntimeError(f"{self.flag} {self.given} is claimed outside Output.open, or twice")
        claim()

    def _claim(self, previous: OutputRecord | None) -> None:
        """The default claim (see `open`)."""
        if not self.folder:
            self.write_record(RUNNING, **self._sections)
        elif self.leaves_others:
            self.path.mkdir(parents=True, exist_ok=True)
            replaced = previous.entries if previous is not None and self.overwrite else {}
            self.notice_kept(remove_entries(self.path, replaced))
            self.write_record(RUNNING, entries={})

    def _put_back(self, before: bytes | None) -> None:
        """A file's record as it was before this run (none: removed)."""
        if before is None:
            self.record_path.unlink(missing_ok=True)
        else:
            with contextlib.suppress(OSError):
                self.record_path.write_bytes(before)

    def notice_kept(self, kept: list[str]) -> None:
        """Say, in one line, which files of a user stayed in the folder's entries when the earlier run's went."""
        if kept:
            shown = ", ".join(kept[:5]) + (f", and {len(kept) - 5} more" if len(kept) > 5 else "")
            print(
                f"{self.flag} {self.given}: kept {shown}, which {self.command} did not write (only the files its "
                "earlier run wrote were removed)",
                file=sys.stderr,
                flush=True,
            )

    def check(self, inputs: Iterable[str | os.PathLike | None] = (), *, resume: bool = False) -> OutputRecord | None:
        """Refuse, before any work, to write this output (`UsageError`); else the record of an earlier run of it.

        With `resume`, an earlier run's output of this command is accepted without the overwrite
        flag (the command then continues it; it must compare that run's settings with its own).
        """
        outputs = {self.flag: self.path}
        if not self.folder:
            outputs[f"{self.flag}'s record"] = self.record_path
        check_not_protected(self.flag, self.given)
        check_outputs_apart(outputs, inputs)
        if self.path.is_symlink():
            raise UsageError(f"{self.flag} {self.given} is a symbolic link; give the folder or file it stands for")
        if self.folder and self.path.exists() and not self.path.is_dir():
            raise UsageError(f"{self.flag} {self.given} is a file, not a folder")
        for path in (self.path, self.record_path) if not self.folder else ():
            if path.exists() and (kind := foreign_kind(os.lstat(path))) is not None:
                raise UsageError(f"{self.flag} {self.given}: {path} is {kind}; nothing is written through it: move it away")
        previous = self._previous()
        if previous is None:
            return None
        if not (self.overwrite or resume):
            resume_hint = f" (or {self.resume_hint})" if self.resume_hint else ""
            raise UsageError(
                f"{self.flag} {self.given} holds the output of an earlier run of {self.command} "
                f"({previous.state}); to run it again, pass {self.overwrite_flag} to replace it or choose another "
                f"{self.flag}{resume_hint}"
            )
        return previous

    def _previous(self) -> OutputRecord | None:
        """The record of this command's earlier output here; None when there is none; `UsageError` when what is
        there is not this command's to replace."""
        exists = self.path.exists()
        if self.folder:
            found = sorted(entry.name for entry in self.path.iterdir()) if exists else []
            if not found:
                return None
        elif not exists and not self.record_path.exists():
            return None
        record = OutputRecord.read(self.record_path)
        if record is None:
            what = f"{self.given} is not empty" if self.folder else f"{self.given if exists else self.record_path} exists"
            record_is = "is missing or not a record" if self.record_path.exists() else "is missing"
            raise UsageError(
                f"{self.flag}: {what} and was not written by {self.command} (its record {self.record_path.name} "
                f"{record_is}); nothing is replaced, even with {self.overwrite_flag}: move it away or choose another"
            )
        if record.written_by != self.command:
            raise UsageError(
                f"{self.flag} {self.given} was written by {record.written_by}, not {self.command}; nothing is "
                f"replaced: choose another"
            )
        if self.folder and found == [FOLDER_RECORD] and not record.entries:
            # An earlier run that wrote nothing (it failed, or was killed, as it started): nothing to keep.
            return None
        if self.folder:
            self._check_only_own_entries(record, found)
        return record

    def _check_only_own_entries(self, record: OutputRecord, found: list[str]) -> None:
        """Refuse a folder holding anything its record does not list, or a record listing what the command
        never writes (an edited or damaged record must not make a user's file deletable)."""
        strange = [name for name in record.entries if not self._is_entry_name(name)]
        strange += [
            f"{name}/{file}" for name, files in record.entries.items() for file in files or () if not is_relative_file(file)
        ]
        if strange:
            raise UsageError(
                f"{self.record_path} lists {', '.join(strange[:3])}, which {self.command} never writes: the record "
                "was edited or damaged; nothing in the folder is replaced"
            )
        foreign = [
            name
            for name in found
            if name != FOLDER_RECORD
            and name not in record.entries
            and (not self.leaves_others or self._is_entry_name(name))
        ]
        for name, files in record.entries.items():
            if name not in self.shared_entries:
                foreign += unlisted_files(self.path / name, files)
        if foreign:
            shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise UsageError(
                f"{self.flag} {self.given} holds {shown}, which {self.command} did not write; nothing is replaced: "
                "move those away or choose another"
            )

    def _is_entry_name(self, name: str) -> bool:
        plain = name not in ("", ".", "..", FOLDER_RECORD) and "/" not in name and "\\" not in name
        return plain and (self.entry_names is None or bool(self.entry_names.fullmatch(name)))

    def lock(self) -> OutputLock:
        """The output's lock (`open` takes it; `with output.lock():` for a run of its own)."""
        if self._lock is None:
            self._lock = OutputLock(self.path, self.command, self.flag)
        return self._lock

    def write_record(self, state: str = RUNNING, *, entries: dict | None = None, **sections) -> None:
        """Write this run's record (`state`, the folder's `entries` if given, `sections` added to the earlier ones);
        a folder is created."""
        if self.record is None:
            self.record = OutputRecord(self.command)
        if entries is not None:
            self.record.entries = entries
        self.record.sections.update(sections)
        self.record.state = state
        self.record.finished = now() if state == COMPLETE else None
        write_json(self.record_path, self.record.to_json())

    @contextlib.contextmanager
    def atomic_folder(self, **sections) -> Iterator[Path]:
        """A staging folder that replaces the folder output whole when the block succeeds (`files.atomic_folder`).

        Its record (`complete`, listing every file written) goes in with it; an earlier output is
        checked again just before it is replaced, in case something was put in it meanwhile.
        """
        with atomic_folder(self.path, replace=self.overwrite) as staging:
            yield staging
            self.record = OutputRecord(self.command, entries=listing(staging))
            self.record.sections.update(sections)
            self.record.state, self.record.finished = COMPLETE, now()
            write_json(staging / FOLDER_RECORD, self.record.to_json())
            self._previous()


def check_all(outputs: list[Output], inputs: Iterable[str | os.PathLike | None] = ()) -> None:
    """`Output.check` of every output of a run, and no two of them at one path or sharing a record."""
    inputs = list(inputs)
    seen: dict[Path, Output] = {}
    for output in outputs:
        output.check(inputs)
        for path in {output.path, output.record_path}:
            other = seen.setdefault(path, output)
            if other is not output:
                raise UsageError(
                    f"{other.flag} {other.given} and {output.flag} {output.given} would both be written at {path}: "
                    "give them different names"
                )


@contextlib.contextmanager
def open_all(outputs: Iterable[Output], inputs: Iterable[str | os.PathLike | None] = (), **sections) -> Iterator[None]:
    """`Output.open` of every output of a run that writes several files (none twice: `check_all`), around the run."""
    outputs, inputs = list(outputs), list(inputs)
    check_all(outputs, inputs)
    with contextlib.ExitStack() as stack:
        for output in outputs:
            stack.enter_context(output.open(inputs, **sections))
        yield


def arguments_of(args) -> dict:
    """A command's parsed arguments as its record keeps them: paths as strings, secrets and callables left out."""
    kept = {}
    for name, value in vars(args).items():
        if callable(value) or "token" in name:
            continue
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        elif isinstance(value, list | tuple):
            value = [os.fspath(item) if isinstance(item, os.PathLike) else item for item in value]
        kept[name] = value
    return {"arguments": kept}
