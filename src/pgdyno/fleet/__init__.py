"""Fleet runs: one plan on several hosts at once over SSH (`pgdyno fleet`): the hosts file
(hosts.py), the controller that drives one pgdyno per host (run.py) and its status file
(status.py)."""
