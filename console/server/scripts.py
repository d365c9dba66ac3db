"""The constant shell scripts the lifecycle runs on a host, in the workdir (console/server/lifecycle.py). No data is
ever put in them: values go as arguments ($1, $2, …), each one quoted word.

On the host, in the workdir:
    server.pid    the server's pid (the leader of its own session and process group)
    server.log    its stdout and stderr (the previous run's is kept as server.log.1)
    server.json   what pivot started: profile, argv, pid and start time, port, whether it was stopped
    server.lock   held (flock) by every change of server.json
"""

from __future__ import annotations

RECORD, PIDFILE, LOG = "server.json", "server.pid", "server.log"
MARK = "---pivot---"
# One probe per poll: the record, the process's /proc stat, the last log line, the host's clock (the record's start is
# the host's time: an uptime is reckoned on its clock, never this one's). Constant: no data in it.
# The pid file is read as digits or not at all; pivot takes the process for the server only if /proc says it is the
# record's pid at the record's start time (console/server/lifecycle.py, server_process).
PROBE = (
    f"head -c 262145 {RECORD} 2>/dev/null; echo; echo {MARK}; p=$(head -c 32 {PIDFILE} 2>/dev/null); "
    f'case $p in *[!0-9]*|"") ;; *) cat /proc/$p/stat 2>/dev/null;; esac; echo; echo {MARK}; tail -n 1 {LOG} 2>/dev/null; '
    f"echo; echo {MARK}; date +%s"
)
LOCK = "server.lock"
# Every change of the record holds the host's lock (flock, util-linux; where a host has none, the compare still holds)
# and first compares the record with the one the console acted on ($1, its text as read): a second console that
# started, stopped or switched the server meanwhile makes this one refuse (exit 76) rather than overwrite its record.
_LOCKED = (
    f'exec 9>>{LOCK}; if command -v flock >/dev/null; then flock -w 20 9 || {{ echo "another console holds '
    f'{LOCK} on this host" >&2; exit 75; }}; fi; now=$(cat {RECORD} 2>/dev/null); [ "$now" = "$1" ] || '
    '{ echo "the record of the server changed meanwhile: another console acted on this host" >&2; exit 76; }; '
)
# Detached start, the record written in the same remote step (an interrupted console leaves a server with its record,
# or neither: HUP, INT, TERM and PIPE are ignored once the lock is held, and given back to the server, whose SIGTERM
# must end it): its own session, no inherited descriptors (a process holding the channel's makes SSH hang, one holding
# the lock blocks every later change). $2 $3 $4: the record's JSON around its pid and its start time, then the argv.
START = (
    _LOCKED + f'pre=$2 mid=$3 post=$4; shift 4; trap "" HUP PIPE INT TERM; [ -f {LOG} ] && mv -f {LOG} {LOG}.1; '
    f'(trap - HUP PIPE INT TERM; exec setsid "$@" </dev/null >{LOG} 2>&1 9>&-) & p=$!; '  # the server's own signals
    f't=$(sed "s/.*) //" /proc/$p/stat | cut -d" " -f20); '
    f'printf "%s%s%s%s%s" "$pre" "$p" "$mid" "$t" "$post" >{RECORD}.tmp.$$ && mv -f {RECORD}.tmp.$$ {RECORD}; '
    f"echo $p >{PIDFILE}; echo $p $t"
)
# A record replaced (marked stopped) only if it is still the one read: $2 is the new text.
REWRITE = _LOCKED + f'printf "%s" "$2" >{RECORD}.tmp.$$ && mv -f {RECORD}.tmp.$$ {RECORD}'
# A stop: the kill ("$@", the agent's) and then the record marked stopped ($2), in one remote step under the host's
# lock, if the record is still the one read; an interrupted console leaves the record saying what was done. Not when
# the agent could not run (exit 99, NOT_OURS: it is uploaded and the step run again).
KILL_THEN_MARK = (
    _LOCKED + f'new=$2; shift 2; trap "" HUP PIPE INT TERM; "$@" 9>&-; st=$?; [ $st -eq 99 ] || '
    f'{{ printf "%s" "$new" >{RECORD}.tmp.$$ && mv -f {RECORD}.tmp.$$ {RECORD}; }} || rm -f {RECORD}.tmp.$$; exit $st'
)
# A server taken over: its record and pid file written together, if the record is still the one read ($3: its pid).
ADOPT = _LOCKED + f'printf "%s" "$2" >{RECORD}.tmp.$$ && mv -f {RECORD}.tmp.$$ {RECORD} && echo "$3" >{PIDFILE}'
PID_STANDIN, TICKS_STANDIN = 7_770_000_001, 7_770_000_002  # stand-ins in the record's JSON, for the pid and start time the host fills in
