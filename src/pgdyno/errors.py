"""Exception hierarchy: library code raises these; only the CLI turns them into messages.

Every message is one sentence that says what went wrong and what to do about it.
"""

from enum import IntEnum


class ExitStatus(IntEnum):
    OK = 0
    ERROR = 1  # a run or an operation failed
    USAGE = 2  # bad options or input
    UNAVAILABLE = 3  # something pgdyno needs is missing or unreachable
    INTERRUPTED = 130


class PgdynoError(Exception):
    """Base of every error pgdyno reports to a user as one sentence."""

    exit_status = ExitStatus.ERROR


class UsageError(PgdynoError):
    """The user asked for something that cannot be done as asked."""

    exit_status = ExitStatus.USAGE


class NoResultsYet(UsageError):
    """A reading command pointed at a results store that holds no results yet."""


class ParseError(PgdynoError):
    """Output of an external tool could not be understood."""


class BinariesError(PgdynoError):
    """PostgreSQL binaries are missing, broken or cannot be installed."""

    exit_status = ExitStatus.UNAVAILABLE


class ClusterError(PgdynoError):
    """The sandbox cluster could not be created, started or stopped."""


class ConnectionFailed(PgdynoError):
    """A PostgreSQL server could not be reached."""

    exit_status = ExitStatus.UNAVAILABLE


class DatasetError(PgdynoError):
    """A pgbench dataset could not be prepared."""


class PgbenchFailed(PgdynoError):
    """pgbench exited with an error; carries its stderr."""

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr


class StoreError(PgdynoError):
    """The results database could not be read or written."""


class ProcessError(PgdynoError):
    """An external command failed; carries its stderr."""

    def __init__(self, message: str, stderr: str = "", returncode: int | None = None) -> None:
        super().__init__(message)
        self.stderr = stderr
        self.returncode = returncode


class Interrupted(BaseException):
    """The user or the system asked pgdyno to stop (SIGINT / SIGTERM).

    Not an Exception, as KeyboardInterrupt is not: the SIGTERM handler raises it wherever the
    main thread is, and a handler for errors there (`except PgdynoError` around a plan check, a
    probe, a retry) swallowed it, so a stop request sent once (as `fleet run` sends it to each
    host) was lost and the run went on to its end."""

    exit_status = ExitStatus.INTERRUPTED


class WorkdirError(PgdynoError):
    """The work directory (or a directory under it) cannot be created, opened or written."""

    exit_status = ExitStatus.UNAVAILABLE


class StoreUnavailable(StoreError):
    """The results database file is damaged, not a database, or cannot be opened."""

    exit_status = ExitStatus.UNAVAILABLE


class OutputError(PgdynoError):
    """pgdyno's own output could not be written as asked (e.g. a value JSON cannot carry)."""


class ConnectionLost(ConnectionFailed):
    """An open connection to PostgreSQL broke: the server stopped, restarted or went away."""


class SweepStopped(PgdynoError):
    """A fault every later run would share (server stopped, disk full) ended a bench sweep."""


class QueryRefused(PgdynoError):
    """PostgreSQL refused or could not complete one statement; the session is still usable.

    Carries the SQLSTATE and the server's own message, so callers can say why in one clause.
    """

    def __init__(self, message: str, sqlstate: str | None = None, server_message: str = "") -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.server_message = server_message

    @property
    def reason(self) -> str:
        """The first line of the server's message ("permission denied for view pg_stat_io")."""
        for line in self.server_message.splitlines():
            if line.strip():
                return line.strip()
        return type(self).__name__


class InsufficientPrivilege(QueryRefused):
    """The role lacks a privilege the statement needs (SQLSTATE 42501)."""


class UndefinedObject(QueryRefused):
    """The statement names a table, view, column, function or object the server does not have,
    as a query written for another server version does."""


class ServerTrouble(QueryRefused):
    """The server could not run a statement because of its own state (out of disk or memory,
    cancelled, a lock or a conflict), which says nothing about the statement itself."""


class RemoteUnavailable(PgdynoError):
    """A remote host could not be reached, refused pgdyno's keys or its host key is unknown."""

    exit_status = ExitStatus.UNAVAILABLE


class RemoteFailed(PgdynoError):
    """A remote host was reached but something run there failed (the agent, a command)."""
