#!/usr/bin/env bash
# A real single-host Slurm for the dispatch tests: Debian's slurm-wlm (22.05) with munge, and
# slurmdbd on MariaDB (submitit reads job states with sacct, which needs accounting). One node (this
# host, on loopback), all its CPUs, no GPU; partition `debug`. Idempotent: a running Slurm is left as
# it is. Needs root and apt-get; prints one line and exits 0 without them (the tests then skip and
# say why).
#   tools/slurm-local.sh          install (if needed) and start
#   tools/slurm-local.sh status   print sinfo
set -uo pipefail

if [ "${1:-}" = status ]; then sinfo; exit $?; fi
if sinfo -h >/dev/null 2>&1 && sacct -n -X -S now >/dev/null 2>&1; then echo "slurm: already running"; exit 0; fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "slurm: not started (needs root and apt-get to install slurm-wlm, slurmdbd, munge, mariadb-server)"; exit 0
fi
need=()
for p in slurmctld:slurmctld slurmd:slurmd slurmdbd:slurmdbd munged:munge mariadbd:mariadb-server sbatch:slurm-client; do
  command -v "${p%%:*}" >/dev/null 2>&1 || [ -x "/usr/sbin/${p%%:*}" ] || need+=("${p##*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}") >/dev/null 2>&1 \
    || { echo "slurm: could not install ${need[*]}"; exit 0; }
fi

host=$(hostname -s)
cpus=$(nproc)
mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge /var/run/slurm
cat > /etc/slurm/slurm.conf <<EOF
# written by gpuenv tools/slurm-local.sh: one host on loopback, for tests
ClusterName=gpuenv
SlurmctldHost=${host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/var/run/slurm/slurmctld.pid
SlurmdPidFile=/var/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=600
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=${host} NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=${mem} State=UNKNOWN
PartitionName=debug Nodes=${host} Default=YES MaxTime=INFINITE State=UP
EOF
cat > /etc/slurm/slurmdbd.conf <<EOF
DbdHost=localhost
SlurmUser=root
AuthType=auth/munge
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=gpuenv-test
StorageLoc=slurm_acct_db
LogFile=/var/log/slurm/slurmdbd.log
PidFile=/var/run/slurm/slurmdbd.pid
EOF
chmod 600 /etc/slurm/slurmdbd.conf

# munge: the package's key, the daemon as its own user
[ -f /etc/munge/munge.key ] || (mungekey --create 2>/dev/null || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null)
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null
chmod 400 /etc/munge/munge.key
pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged || { echo "slurm: munged did not start"; exit 0; }

# MariaDB for slurmdbd
if ! mysqladmin ping >/dev/null 2>&1; then
  mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
  [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql >/dev/null 2>&1
  (mysqld_safe >/dev/null 2>&1 &)
  for _ in $(seq 60); do mysqladmin ping >/dev/null 2>&1 && break; sleep 1; done
fi
mysql -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'gpuenv-test'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;" \
  || { echo "slurm: MariaDB did not start"; exit 0; }

pgrep -x slurmdbd >/dev/null || /usr/sbin/slurmdbd
for _ in $(seq 30); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 1; done
sacctmgr -i add cluster gpuenv >/dev/null 2>&1
pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld
pgrep -x slurmd >/dev/null || /usr/sbin/slurmd
for _ in $(seq 60); do
  if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
    echo "slurm: up (node ${host}, ${cpus} CPUs, partition debug, accounting in MariaDB)"; exit 0
  fi
  scontrol update nodename="${host}" state=resume >/dev/null 2>&1
  sleep 1
done
echo "slurm: did not come up (see /var/log/slurm/*.log)"; exit 0
