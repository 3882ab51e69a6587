"""The hosts file of `pgdyno fleet run`: what it accepts and the one sentence for the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgdyno.errors import UsageError
from pgdyno.fleet.hosts import load_hosts

GOOD = """\
[[host]]
name = "db-a"
ssh = "bench@db-a"
dsn = "host=/var/run/postgresql dbname=postgres"
[[host]]
name = "db_b.2"
ssh = "ssh://db-b:2222"
dsn = "host=10.0.0.2 dbname=postgres password=secret"
"""


def test_hosts_are_read_in_order(tmp_path: Path) -> None:
    path = tmp_path / "hosts.toml"
    path.write_text(GOOD)
    hosts = load_hosts(path)
    assert [(h.name, h.ssh) for h in hosts] == [
        ("db-a", "bench@db-a"),
        ("db_b.2", "ssh://db-b:2222"),
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "host: Field required"),
        ("[[host]]\nname = 'a'\nssh = 'a'\n", "host.0.dsn: Field required"),
        ("[[host]]\nname = 'a'\nssh = 'a'\ndsn = 'x'\nport = 22\n", "host.0.port: Extra inputs"),
        ("[[host]]\nname = '../a'\nssh = 'a'\ndsn = 'x'\n", "host.0.name: String should match"),
        ("[[host]]\nname = 'a'\nssh = 'a'\ndsn = 'x'\n" * 2, "host name 'a' is given twice"),
        ("[[host]\n", "is not a TOML file"),
        ("host = []\n", "host: List should have at least 1 item"),
    ],
)
def test_a_bad_hosts_file_is_refused_in_one_sentence(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "hosts.toml"
    path.write_text(text)
    with pytest.raises(UsageError, match=None) as caught:
        load_hosts(path)
    message = str(caught.value)
    assert says in message and message.count(". ") == 0 and str(path) in message


def test_a_missing_hosts_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read the hosts file"):
        load_hosts(tmp_path / "nope.toml")


@pytest.mark.parametrize("name", ["status.json", "status.partial"])
def test_a_host_named_as_the_fleets_own_files_is_refused(tmp_path: Path, name: str) -> None:
    """Each host's directory sits beside the fleet's status file: a host named `status.json`
    made the status file a directory (IsADirectoryError after its child had started)."""
    path = tmp_path / "hosts.toml"
    path.write_text(f"[[host]]\nname = '{name}'\nssh = 'a'\ndsn = 'x'\n")
    with pytest.raises(UsageError) as caught:
        load_hosts(path)
    assert str(caught.value) == (
        f"{path}: host name {name!r} is the name of a file pgdyno keeps beside the hosts' "
        "directories (each host's name is also its directory's): rename the host."
    )
