"""Remote hosts over SSH: the connection (ssh.py), the agent streamed to the host (agent.py and
agent_client.py), its files (host_tree.py), its OS timeline (os_source.py) and pgbench run
beside its server (driver.py), put together by host.py."""
