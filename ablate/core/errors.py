"""The exception vocabulary of ablate. Each class's docstring is its user-facing meaning.

Library code raises these; the CLI catches :class:`AblateError` in one place and maps ``exit_code``
to the process exit status. Documented exit codes:

====  ==========================================================================
0     success
1     a domain failure (a probe found an unfaithful cell, a run could not start, ...)
2     bad input: a missing path, an invalid spec file, an unknown id, a wrong option
3     finished, but some items failed (``ablate run``) or some inputs were skipped
130   interrupted (Ctrl-C); whatever was written is consistent and resumable
====  =========================================================================="""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_PARTIAL = 3
#: ``ablate gate``: the run could not detect the change it had to (neither a pass nor a regression seen).
EXIT_INCONCLUSIVE = 4
EXIT_INTERRUPTED = 130


class AblateError(Exception):
    """ablate could not do what was asked."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


class UsageError(AblateError):
    """The input given to ablate is wrong: fix the path, option or value named."""

    exit_code = EXIT_USAGE


class NotFound(UsageError):
    """A path, id or program that ablate needs does not exist."""


class NotARepo(UsageError):
    """The repository given is not a usable git work tree."""


class OutputExists(UsageError):
    """The output folder already exists and ablate will not overwrite it."""


@dataclass(frozen=True)
class Problem:
    """One located problem in a spec file: which file, which field, what was wrong."""

    file: str
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.field}" if self.field else self.file
        return f"{where}: {self.message}"


class SpecError(UsageError):
    """A spec file (layers, cells, tasks, sim script, manifest) is invalid."""

    def __init__(self, problems: Iterable[Problem], *, hint: str | None = None) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems), hint=hint)

    @classmethod
    def single(cls, file: Path | str, field: str, message: str, *, hint: str | None = None) -> SpecError:
        return cls([Problem(str(file), field, message)], hint=hint)


class UnsafeEnvironment(AblateError):
    """An environment would leak into or write through to the user's real setup, so ablate refused it."""


class ClaudeNotFound(UsageError):
    """The Claude Code CLI could not be found or does not run."""


class RunFolderError(AblateError):
    """A run folder is missing, locked, corrupt or incompatible with the requested run."""

    @classmethod
    def bad_input(cls, message: str, *, hint: str | None = None) -> RunFolderError:
        """The folder given is not a (complete) run folder: a bad input, exit 2."""
        err = cls(message, hint=hint)
        err.exit_code = EXIT_USAGE
        return err


#: What to do about a full file system, whichever command met it.
DISK_FULL_HINT = (
    "free space there (or point --out/--work-dir elsewhere), then run the command again; "
    "a run resumes with `ablate run --resume <folder>`"
)


class DiskFull(AblateError):
    """A file system ablate writes to (a run folder, a cell's layer, TMPDIR) is full: free space there, then
    resume; what was written before is complete (every write is atomic)."""
