"""A simulated tensor-parallel worker: a real process named like SGLang's
`sglang::scheduler_TP<rank>` that "holds" its GPU's memory while it lives.

It does not die with the server: a server killed without its process group
leaves its workers orphaned and still holding memory, as on a real host. The
worker of `--zombie-helper` rank also forks a helper that exits when the
server dies and is never reaped, so it lingers as a zombie (state Z) holding
memory until the worker itself is killed.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from setproctitle import setproctitle

from console.sim import state


def _log(rank: int, message: str) -> None:
    # one write, as logging's handler makes: the ranks share the log, and print's line and newline went as two
    sys.stdout.write(f"[{time.strftime('%Y-%m-%d %H:%M:%S')} TP{rank}] {message}\n")
    sys.stdout.flush()


def _helper(home: state.Path, gpu: int, mib: int, server_pid: int, server_start: int | None, rank: int) -> None:
    setproctitle(f"sglang::scheduler_TP{rank}_ipc")
    state.claim(home, gpu, mib)
    while state.alive(server_pid, server_start):
        time.sleep(0.2)
    os._exit(0)  # the worker never waits for us: we stay a zombie, with our claim


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sglang-sim-worker")
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--gpu", type=int, required=True)
    parser.add_argument("--mib", type=int, required=True)
    parser.add_argument("--server-pid", type=int, required=True)
    parser.add_argument("--zombie-helper-mib", type=int, default=0)
    args = parser.parse_args(argv)
    setproctitle(f"sglang::scheduler_TP{args.rank}")
    home = state.sim_home()
    server_start = state.proc_start_ticks(args.server_pid)

    def on_term(signum: int, _frame: object) -> None:
        state.release(home)
        _log(args.rank, f"received {signal.Signals(signum).name}, exiting")
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    state.claim(home, args.gpu, args.mib)
    if args.zombie_helper_mib and os.fork() == 0:
        _helper(home, args.gpu, args.zombie_helper_mib, args.server_pid, server_start, args.rank)
    host_pid = int(os.environ.get("PIVOT_SIM_HOST_PID", "0"))
    host_start = state.proc_start_ticks(host_pid) if host_pid else None
    orphaned = False
    while True:
        time.sleep(0.5)
        if host_pid and not state.alive(host_pid, host_start):
            state.release(home)  # the simulated host itself is gone: nothing is left to simulate for
            return 0
        if not orphaned and not state.alive(args.server_pid, server_start):
            orphaned = True
            _log(args.rank, "lost the server process; still holding GPU memory")


if __name__ == "__main__":
    raise SystemExit(main())
