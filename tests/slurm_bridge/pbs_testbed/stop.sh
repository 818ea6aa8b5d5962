#!/usr/bin/env bash
# Stop the OpenPBS test bed started by start.sh (inside the PBS root): PBS's own stop,
# then whatever of it is left (a mom still ending jobs, the data service's PostgreSQL).
set -uo pipefail
[ -f /etc/pbs.conf ] || exit 0
[ -x /etc/init.d/pbs ] && timeout 60 /etc/init.d/pbs stop >/dev/null 2>&1
for _ in $(seq 1 20); do
  pgrep -f '^/opt/pbs/sbin/pbs_' >/dev/null 2>&1 || break
  sleep 0.5
done
pkill -KILL -f '^/opt/pbs/sbin/pbs_' 2>/dev/null
pkill -KILL -f 'postgres.*/var/spool/pbs/datastore' 2>/dev/null
exit 0
