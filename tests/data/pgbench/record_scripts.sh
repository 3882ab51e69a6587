#!/bin/bash
# usage: record_scripts.sh N BIN_DIR  -- records a weighted multi-script pgbench run of
# PostgreSQL N (transaction logs and stdout) into /tmp/pgrec-scripts/out/pgN.
# Expects: BIN_DIR holding postgres, initdb, pg_ctl, pgbench of version N; a user "postgres";
# root. tests/data/pgbench/README.md ("Several scripts") says what was kept and how.
set -u
N=$1
BIN=$2
ROOT=/tmp/pgrec-scripts
PORT=561$N
SOCK=$ROOT/sock/$N
DATA=$ROOT/data/$N
OUT=$ROOT/out/pg$N
LOGS=$ROOT/logs/$N
TX=$ROOT/tx/$N
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p $SOCK $DATA $OUT $LOGS $TX
chown -R postgres:postgres $ROOT/sock $ROOT/data $ROOT/logs
chmod 700 $DATA
runuser -u postgres -- $BIN/initdb -D $DATA -U postgres --auth=trust --no-sync -E UTF8 --locale=C > $LOGS/initdb.log 2>&1 || { echo initdb failed; exit 1; }
# 15+ retry serialization failures (--max-tries): there every transaction runs under
# repeatable read so that concurrent updates of one row fail; 14 cannot retry (a failure
# aborts the client), so it keeps read committed, where they wait instead.
ISO="read committed"
[ $N -ge 15 ] && ISO="repeatable read"
runuser -u postgres -- $BIN/postgres -D $DATA -p $PORT -k $SOCK -c listen_addresses='' \
  -c "default_transaction_isolation=$ISO" > $LOGS/server.log 2>&1 &
PM=$!
for i in $(seq 1 100); do $BIN/pg_isready -q -h $SOCK -p $PORT && break; sleep 0.1; done
$BIN/pg_isready -h $SOCK -p $PORT || { echo start failed; cat $LOGS/server.log; kill $PM; wait $PM; exit 1; }
export PGHOST=$SOCK PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
PGB=$BIN/pgbench
cd $HERE/scripts
$PGB -i -s 2 > $LOGS/init.txt 2>&1 || { echo init failed; exit 1; }
$BIN/psql -q -c "CREATE TABLE pgdyno_hot_row (id int PRIMARY KEY, v bigint); INSERT INTO pgdyno_hot_row VALUES (1, 0);" > $LOGS/psql.txt 2>&1
RETRY=()
[ $N -ge 15 ] && RETRY=(--max-tries 10 --failures-detailed)
# -t, not -T: every transaction of the run is in the log, so the log and pgbench's own
# per-script summary count the same transactions.
$PGB -n -c 4 -j 2 -t 1000 -b select-only@45 -b simple-update@43 -b tpcb-like@4 \
  -f hot_row.sql@8 "${RETRY[@]}" -l --log-prefix=$TX/tx \
  > $OUT/scripts.stdout 2> $OUT/scripts.stderr
echo $? > $OUT/scripts.exitcode
ls $TX > $LOGS/txfiles
k=0; for f in $(ls $TX | sort -t. -k3n); do cp $TX/$f $OUT/scripts.tx.$k.log; echo "$f -> scripts.tx.$k.log" >> $LOGS/txfiles; k=$((k+1)); done
$PGB --version > $OUT/scripts.version
runuser -u postgres -- $BIN/pg_ctl -D $DATA -m fast -w stop >> $LOGS/pg_ctl.log 2>&1
wait $PM
echo "done $N"
