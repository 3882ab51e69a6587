"""pgdyno's side of the remote agent (remote/agent.py): start it in a temporary directory,
ask it things, receive its ticks, and make sure nothing of it stays on the host.

Requests are answered in order over one pipe; ticks of the sampler arrive between answers and
go to a queue of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import threading
import time
from dataclasses import dataclass
from importlib.resources import as_file, files
from typing import Any

from pgdyno.errors import RemoteFailed, RemoteUnavailable
from pgdyno.remote.ssh import RemoteProcess, SshSession

REQUEST_TIMEOUT_S = 60.0
AGENT_NAME = "pgdyno-agent.py"
CLOCK_PROBES = 8  # round trips measured; the shortest gives the offset (as NTP does)


@dataclass(frozen=True)
class ClockOffset:
    """The remote clock minus this one, in seconds, within +/- half the round trip."""

    offset_s: float
    round_trip_s: float

    def as_detail(self) -> dict[str, object]:
        return {"offset_ms": round(self.offset_s * 1000, 3),
                "round_trip_ms": round(self.round_trip_s * 1000, 3)}  # fmt: skip


class Agent:
    """The agent running on a remote host; one per connection."""

    def __init__(self, session: SshSession, directory: str, process: RemoteProcess) -> None:
        self.session = session
        self.directory = directory  # the temporary directory it runs in and removes
        self._process = process
        self._lock = threading.Lock()  # one request at a time
        self._next_id = 0
        self._answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self.ticks: queue.Queue[dict[str, Any]] = queue.Queue()
        self.ready: dict[str, Any] = {}
        session.submit(self._read())

    @classmethod
    def start(cls, session: SshSession) -> Agent:
        """Copy the agent into a new temporary directory of the host and start it there."""
        made = session.run(["mktemp", "-d", "-t", "pgdyno.XXXXXXXX"])
        directory = made.stdout.strip()
        if made.code != 0 or not directory.startswith("/"):
            raise RemoteFailed(f"could not make a temporary directory on {session.destination} "
                               f"(mktemp: {made.stderr.strip() or made.code}).")  # fmt: skip
        try:
            with as_file(files("pgdyno.remote") / "agent.py") as source:
                session.put(source, f"{directory}/{AGENT_NAME}")
            process = session.start(["python3", "-u", f"{directory}/{AGENT_NAME}"])
        except BaseException:
            session.run(["rm", "-rf", directory])
            raise
        agent = cls(session, directory, process)
        try:
            agent.ready = agent._answer(timeout_s=REQUEST_TIMEOUT_S).get("ready") or {}
        except BaseException:
            agent.close()
            raise
        if not agent.ready:
            agent.close()
            raise RemoteFailed(f"pgdyno's agent did not start on {session.destination}: it "
                               "needs python3 (3.7 or later) on the host's PATH.")  # fmt: skip
        return agent

    async def _read(self) -> None:
        """On the connection's loop: sort the agent's lines into answers and ticks."""
        while True:
            try:
                line = await self._process.read_line()
            except (OSError, asyncio.CancelledError, Exception):
                line = ""
            if not line:
                self._answers.put({"gone": True})
                self.ticks.put({"gone": True})
                return
            try:
                message = json.loads(line)
            except ValueError:
                continue  # not the agent's (a login banner printed to stdout)
            (self.ticks if "tick" in message else self._answers).put(message)

    def _answer(self, timeout_s: float) -> dict[str, Any]:
        try:
            message = self._answers.get(timeout=timeout_s)
        except queue.Empty:
            raise RemoteFailed(f"pgdyno's agent on {self.session.destination} did not answer "
                               f"within {timeout_s:.0f} s.") from None  # fmt: skip
        if message.get("gone"):
            self._answers.put(message)  # every later request sees it too
            stderr = self._process.stderr().strip().splitlines()
            said = f" ({stderr[-1]})" if stderr else ""
            raise RemoteUnavailable(f"pgdyno's agent on {self.session.destination} stopped"
                                    f"{said}; check the connection and run again.")  # fmt: skip
        return message

    def request(self, op: str, timeout_s: float = REQUEST_TIMEOUT_S, **fields: Any) -> Any:
        """The agent's answer to one request; RemoteFailed with its error when it failed."""
        with self._lock:
            self._next_id += 1
            number = self._next_id
            self._process.write_line(json.dumps({"id": number, "op": op, **fields}))
            while True:
                answer = self._answer(timeout_s)
                if answer.get("id") == number:
                    break
        if "error" in answer:
            raise RemoteFailed(f"pgdyno's agent on {self.session.destination} could not {op} "
                               f"({answer['error']}).")  # fmt: skip
        return answer

    def clock_offset(self) -> ClockOffset:
        """The remote clock against this one, from the round trip that was shortest."""
        best: ClockOffset | None = None
        for _ in range(CLOCK_PROBES):
            sent = time.time()
            answer = self.request("clock")
            back = time.time()
            probe = ClockOffset(float(answer["wall"]) - (sent + back) / 2, back - sent)
            if best is None or probe.round_trip_s < best.round_trip_s:
                best = probe
        assert best is not None
        return best

    def close(self) -> None:
        """Stop the agent (it stops its children and removes its directory), then make sure
        the directory is gone even if the agent could not."""
        self._process.close()
        with contextlib.suppress(RemoteFailed, RemoteUnavailable):
            self.session.run(["rm", "-rf", "--", self.directory], timeout_s=30)
