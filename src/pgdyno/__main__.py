from pgdyno.cli import run

run()
