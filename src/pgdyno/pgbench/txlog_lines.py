"""Reading one thread's per-transaction log: a line, or a chunk of lines counted in bulk.

A chunk's columns are checked and counted with string operations that run in C; a chunk that
fails a check is read again line by line (`parse_line`) to name the line at fault. The result
is one `Part` per completion second: each script's latency tokens counted as written, its lags
and its retries.

Script numbers are counted in bulk when each is one digit (up to ten scripts): a second's
latencies are split by script with byte masks (`bytes.translate`) and `itertools.compress`, so
a log of one script pays nothing and one of five a pass per script. More scripts are read
line by line.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Sequence
from itertools import compress
from pathlib import Path
from typing import NamedTuple

from pgdyno.errors import ParseError

SKIPPED = "skipped"
FAILURE_WORDS = frozenset({"failed", "serialization", "deadlock", "other"})
_WORDS = FAILURE_WORDS | {SKIPPED}
_FIELD_COUNTS = (6, 7, 8)
_DIGITS = "0123456789"
_ASCII_DIGITS = _DIGITS.encode()
# bytes.translate tables: 1 where the script digit is, 0 elsewhere (a mask for compress)
_MASKS = {d: bytes(int(chr(b) == d) for b in range(256)) for d in _DIGITS}
_NONZERO = re.compile("[^0]")


class LogLine(NamedTuple):
    """One line of a per-transaction log. Times are in microseconds."""

    client_id: int
    transaction_no: int
    latency_us: int | None  # None when skipped or failed
    outcome: str  # "ok", "skipped", or the failure word ("failed", "serialization", ...)
    script_no: int
    epoch_s: int  # completion time: unix epoch seconds ...
    epoch_us: int  # ... and microseconds into that second
    lag_us: int | None  # schedule_lag, under -R
    retries: int | None  # under --max-tries other than 1


def _whole(token: str, name: str, signed: bool = False) -> int:
    digits = token[1:] if signed and token.startswith("-") else token
    if not (digits.isascii() and digits.isdigit()):
        raise ParseError(f"field {name} is not a whole number: {token!r}")
    return int(token)


def lag_in_7th(with_lag: bool, with_retries: bool) -> bool:
    """Whether the 7th of 7 fields is ``schedule_lag`` rather than ``retries``.

    With ``-R`` and ``--max-tries`` other than 1 pgbench writes 8 fields, so a caller that
    says the run retries (``with_retries``) gets retries whatever ``with_lag`` says.

    >>> lag_in_7th(True, False), lag_in_7th(True, True), lag_in_7th(False, False)
    (True, False, False)
    """
    return with_lag and not with_retries


def parse_line(line: str, with_lag: bool = True, *, with_retries: bool = False) -> LogLine:
    """Read one line of a per-transaction log of PostgreSQL 14 to 18.

    ``with_lag`` and ``with_retries`` say what a 7th field is: ``schedule_lag`` (``-R``) or
    ``retries`` (``--max-tries`` other than 1, without ``-R``), see :func:`lag_in_7th`;
    8 fields always hold both.

    >>> parse_line("0 81 4621 0 1412881037 912698 3005")[2:]
    (4621, 'ok', 0, 1412881037, 912698, 3005, None)
    >>> parse_line("2 0 failed 0 1499414498 86248 9", with_retries=True)[2:]
    (None, 'failed', 0, 1499414498, 86248, None, 9)
    """
    fields = line.split()
    n = len(fields)
    if n not in _FIELD_COUNTS:
        raise ParseError(f"{n} fields, not 6, 7 or 8, in {line.strip()!r}")
    time = fields[2]
    latency: int | None = None
    if time.isascii() and time.isdigit():
        latency, outcome = int(time), "ok"
    elif time in _WORDS:
        outcome = time
    else:
        raise ParseError(f"the time field {time!r} is neither a number nor a known word")
    has_lag = n == 8 or (n == 7 and lag_in_7th(with_lag, with_retries))
    has_retries = n - has_lag == 7  # what is left after the lag is retries
    return LogLine(
        client_id=_whole(fields[0], "client_id"),
        transaction_no=_whole(fields[1], "transaction_no"),
        latency_us=latency,
        outcome=outcome,
        script_no=_whole(fields[3], "script_no"),
        epoch_s=_whole(fields[4], "time_epoch"),
        epoch_us=_whole(fields[5], "time_us"),
        lag_us=_whole(fields[6], "schedule_lag", signed=True) if has_lag else None,
        retries=_whole(fields[-1], "retries") if has_retries else None,
    )


def _digits(column: list[str]) -> bool:
    """Whether every token is made of ASCII digits only (bytes.isdigit is the fast one)."""
    return "".join(column).encode().isdigit()


def _digits_or_words(column: list[str]) -> bool:
    """Whether every token is ASCII digits or one of the words: the letters left when the
    digits are taken out must be exactly those of the tokens that are words."""
    joined = "".join(column)
    letters = sum(column.count(word) * len(word) for word in _WORDS if word in joined)
    return len(joined.encode(errors="replace").translate(None, _ASCII_DIGITS)) == letters


def _same_length(column: list[str]) -> bool:
    """Whether every token has the length of the first: then the n - 1 spaces of the joined
    column are exactly at every (length + 1)th place."""
    width = len(column[0])
    joined = " ".join(column)
    return len(joined) == len(column) * (width + 1) - 1 and joined[width :: width + 1] == " " * (
        len(column) - 1
    )


class Part:
    """What one file logged in one second: each script's latency tokens counted as written,
    the lags, and the retries."""

    __slots__ = (
        "ended",
        "lag_max",
        "lag_n",
        "lag_sum",
        "line",
        "logged",
        "numbered",
        "path",
        "retried",
        "retries",
        "scripts",
    )

    def __init__(self, path: Path, line: int, with_retries: bool) -> None:
        self.path = path
        self.line = line  # of its first line, for messages
        self.scripts: dict[int, Counter[str]] = {}  # script number -> digits or _WORDS
        self.logged = 0
        # transactions that ended with the `numbered` lines whose client's previous number is
        # known: each such line stands for the transactions since that client's last line
        self.ended = self.numbered = 0
        self.lag_sum = 0
        self.lag_n = 0
        self.lag_max: int | None = None
        # per script number, when the log has a retries column: transactions retried, retries
        self.retried: Counter[int] | None = Counter() if with_retries else None
        self.retries: Counter[int] | None = Counter() if with_retries else None

    def tokens(self, script: int) -> Counter[str]:
        """The latency tokens of one script number."""
        found = self.scripts.get(script)
        if found is None:
            found = self.scripts[script] = Counter()
        return found

    def add_lags(self, lags: list[int]) -> None:
        if lags:
            self.lag_sum += sum(lags)
            self.lag_n += len(lags)
            top = max(lags)
            if self.lag_max is None or top > self.lag_max:
                self.lag_max = top

    def add_retries(self, script: int, retries: int) -> None:
        if retries and self.retried is not None and self.retries is not None:
            self.retried[script] += 1
            self.retries[script] += retries


class _Chunk(NamedTuple):
    """A chunk's columns, checked for bulk counting."""

    fields: int
    clients: list[str]
    numbers: list[str]
    epochs: list[str]
    times: list[str]
    scripts: str  # one digit a line
    lags: list[str] | None
    retries: list[str] | None
    words: bool  # some latencies are words (skipped, failed): their lags are not counted


def _lag_values(times: list[str], lags: list[str], words: bool) -> list[int]:
    """The schedule lags of the transactions that have a latency."""
    if words:
        return [int(g) for t, g in zip(times, lags, strict=True) if t.isdigit()]
    return list(map(int, lags))


def _retried_lines(retries: list[str]) -> list[int]:
    """Indices of the lines whose retries are not 0, found in C when each is one digit."""
    joined = "".join(retries)
    if len(joined) != len(retries):
        return [k for k, r in enumerate(retries) if int(r)]
    return [m.start() for m in _NONZERO.finditer(joined)]


def _count_scripts(part: Part, times: list[str], scripts: str) -> None:
    """Count one second's latency tokens by script number (``scripts``: a digit a line)."""
    present = [d for d in _DIGITS if d in scripts]
    if len(present) == 1:
        part.tokens(int(present[0])).update(times)
        return
    digits = scripts.encode()
    for d in present:
        part.tokens(int(d)).update(compress(times, digits.translate(_MASKS[d])))


class Numbers:
    """Each client's last transaction number seen, shared by the readers of one run's thread
    files (a client's lines are all in one file, and client ids are unique across threads).

    pgbench numbers each client's transactions from 1, every one that ends (skipped and failed
    ones too) and whether or not ``--sampling-rate`` logs it, so two logged lines of a client
    tell exactly how many transactions ended between them. ``before`` holds the numbers known
    before the lines read: a whole run's log starts from 0 for every client (``whole_run``);
    a slice of a log (a period of a switched run) starts from the numbers its router saw, and
    a client without one counts only from its second line.
    """

    __slots__ = ("last", "whole_run")

    def __init__(self, before: dict[int, int] | None = None) -> None:
        self.whole_run = before is None
        self.last: dict[int, int] = {} if before is None else dict(before)

    def take(self, part: Part, clients: Sequence[str], numbers: Sequence[str]) -> None:
        """Count one second's lines of one file (`clients` and `numbers`: their columns)."""
        if len(set(clients)) == 1:  # the common case: a thread's only client in this second
            self._client(part, int(clients[0]), int(numbers[0]), int(numbers[-1]), len(clients))
            return
        lines = Counter(clients)
        last = dict(zip(clients, numbers, strict=True))
        first = dict(zip(reversed(clients), reversed(numbers), strict=True))
        for client, count in lines.items():
            self._client(part, int(client), int(first[client]), int(last[client]), count)

    def line(self, part: Part, client: int, number: int) -> None:
        """Count one line (the line-by-line reading)."""
        self._client(part, client, number, number, 1)

    def _client(self, part: Part, client: int, first: int, last: int, lines: int) -> None:
        before = self.last.get(client, 0 if self.whole_run else None)
        if before is not None and last <= before:  # numbered anew: not one run's log
            before = None
        if before is None:
            part.ended += last - first
            part.numbered += lines - 1
        else:
            part.ended += last - before
            part.numbered += lines
        self.last[client] = last


class FileReader:
    """Turns the chunks of one thread's log into one :class:`Part` per second.

    ``scripts``, when given, is the number of scripts of the run: a higher script number is
    an error. ``numbers``, when given, counts the transactions each line stands for (a log
    sampled by ``--sampling-rate``).
    """

    def __init__(
        self,
        path: Path,
        with_lag: bool,
        with_retries: bool = False,
        scripts: int | None = None,
        numbers: Numbers | None = None,
    ) -> None:
        self.path = path
        self.numbers = numbers
        self.with_lag = with_lag
        self.with_retries = with_retries
        self.scripts = scripts
        # the script digits the bulk path lets through
        self.script_digits = _DIGITS[: min(scripts, 10)].encode() if scripts else _ASCII_DIGITS
        self.fields: int | None = None  # per line, fixed by the first line
        self.lines = 0  # lines read so far
        self.second: int | None = None
        self.part: Part | None = None

    def _columns(self, fields: int) -> tuple[int | None, int | None, tuple[int, ...]]:
        """The lag and retries columns, if any, and the columns that must be plain digits."""
        lag = (
            6
            if fields == 8 or (fields == 7 and lag_in_7th(self.with_lag, self.with_retries))
            else None
        )
        retries = fields - 1 if fields - (lag is not None) == 7 else None
        digits = (0, 1, 5, *range(6, fields))  # a lag may be "-0": slow path
        return lag, retries, digits

    def _start(self, second: int, line: int, done: list[tuple[int, Part]]) -> Part:
        if self.part is not None and self.second is not None:
            done.append((self.second, self.part))
        self.second = second
        has_retries = self.fields is not None and self._columns(self.fields)[1] is not None
        self.part = Part(self.path, line, has_retries)
        return self.part

    def feed(self, text: str) -> list[tuple[int, Part]]:
        """Take whole lines (``text`` ends with a newline); return the seconds completed."""
        n = text.count("\n")
        first_line = self.lines + 1
        self.lines += n
        done = self._fast(text, n, first_line)
        return self._slow(text, first_line) if done is None else done

    def finish(self) -> list[tuple[int, Part]]:
        if self.part is None or self.second is None:
            return []
        return [(self.second, self.part)]

    def _fast(self, text: str, n: int, first_line: int) -> list[tuple[int, Part]] | None:
        """Count a chunk in bulk, or return None, having changed nothing, if any check fails."""
        chunk = self._bulk_columns(text, n)
        if chunk is None:
            return None
        self.fields = chunk.fields
        return self._count_seconds(chunk, n, first_line)

    def _bulk_columns(self, text: str, n: int) -> _Chunk | None:
        """The chunk's columns if every line passes the checks that make bulk counting exact."""
        tokens = text.split()
        fields = self.fields or len(text[: text.find("\n")].split())
        if fields not in _FIELD_COUNTS or len(tokens) != fields * n:
            return None
        lag_col, retries_col, digit_cols = self._columns(fields)
        if not all(_digits(tokens[col::fields]) for col in digit_cols):
            return None
        scripts = self._script_digits(tokens[3::fields])
        epochs = tokens[4::fields]
        if scripts is None or not self._in_time_order(epochs):
            return None
        times = tokens[2::fields]
        words = not _digits(times)
        if words and not _digits_or_words(times):
            return None
        lags = tokens[lag_col::fields] if lag_col is not None else None
        retries = tokens[retries_col::fields] if retries_col is not None else None
        return _Chunk(
            fields,
            tokens[0::fields],
            tokens[1::fields],
            epochs,
            times,
            scripts,
            lags,
            retries,
            words,
        )

    def _script_digits(self, column: list[str]) -> str | None:
        """The script numbers as one string of a digit a line, or None when one is not a
        single digit or is above the run's number of scripts."""
        joined = "".join(column)
        if len(joined) != len(column) or joined.encode(errors="replace").translate(
            None, self.script_digits
        ):
            return None
        return joined

    def _in_time_order(self, epochs: list[str]) -> bool:
        """Whether the completion seconds are plain numbers, sorted, and not before the last."""
        # Equal-length digit strings sort like the numbers they spell.
        if not _digits(epochs) or not _same_length(epochs) or epochs != sorted(epochs):
            return False
        return self.second is None or int(epochs[0]) >= self.second

    def _count_seconds(self, chunk: _Chunk, n: int, first_line: int) -> list[tuple[int, Part]]:
        """Add a checked chunk to the parts of its seconds, one slice of lines per second."""
        epochs, times, lags = chunk.epochs, chunk.times, chunk.lags
        retried = _retried_lines(chunk.retries) if chunk.retries is not None else []
        done: list[tuple[int, Part]] = []
        i = 0
        while i < n:
            stamp = epochs[i]
            j = bisect_right(epochs, stamp, i)
            second = int(stamp)
            part = self.part
            if second != self.second or part is None:
                part = self._start(second, first_line + i, done)
            segment = times[i:j]
            _count_scripts(part, segment, chunk.scripts[i:j])
            part.logged += j - i
            if self.numbers is not None:
                self.numbers.take(part, chunk.clients[i:j], chunk.numbers[i:j])
            if lags is not None:
                part.add_lags(_lag_values(segment, lags[i:j], chunk.words))
            if retried and chunk.retries is not None:
                for k in retried[bisect_left(retried, i) : bisect_left(retried, j)]:
                    part.add_retries(int(chunk.scripts[k]), int(chunk.retries[k]))
            i = j
        return done

    def _slow(self, text: str, first_line: int) -> list[tuple[int, Part]]:
        """Read a chunk line by line, naming the first line that is wrong."""
        done: list[tuple[int, Part]] = []
        for line_no, line in enumerate(text.split("\n")[:-1], start=first_line):
            if not line.strip():
                continue
            where = f"Transaction log {self.path} line {line_no}"
            row = self._checked(line, where)
            part = self.part
            if self.second is None or row.epoch_s != self.second or part is None:
                if self.second is not None and row.epoch_s < self.second:
                    raise ParseError(
                        f"{where} completed at {row.epoch_s}, before the line above it "
                        f"({self.second}), but pgbench writes lines in completion order."
                    )
                part = self._start(row.epoch_s, line_no, done)
            token = row.outcome if row.latency_us is None else str(row.latency_us)
            part.tokens(row.script_no)[token] += 1
            part.logged += 1
            if self.numbers is not None:
                self.numbers.line(part, row.client_id, row.transaction_no)
            if row.lag_us is not None and row.latency_us is not None:
                part.add_lags([row.lag_us])
            if row.retries:
                part.add_retries(row.script_no, row.retries)
        return done

    def _checked(self, line: str, where: str) -> LogLine:
        """One line, read and checked against the first line and the number of scripts."""
        try:
            row = parse_line(line, self.with_lag, with_retries=self.with_retries)
        except ParseError as e:
            raise ParseError(f"{where}: {e}.") from None
        fields = len(line.split())
        if self.fields is None:
            self.fields = fields
        elif fields != self.fields:
            raise ParseError(
                f"{where} has {fields} fields where the first line has {self.fields}: "
                f"{line.strip()!r}."
            )
        if self.scripts is not None and row.script_no >= self.scripts:
            raise ParseError(
                f"{where} is of script number {row.script_no}, but the run had "
                f"{self.scripts} scripts, numbered from 0: logs of another run?"
            )
        return row
