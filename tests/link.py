"""A network link a test can cut: a TCP relay on a loopback port of its own to a target port, in threads (the code
under test runs in other processes or loops). cut() resets every connection through it, as a network failure does;
block() refuses new ones until unblock()."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading


class Link:
    def __init__(self, target_port: int):
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.blocked = False
        self.cuts = 0
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                near, _ = self.listener.accept()
            except OSError:
                return
            if self.blocked:
                _reset(near)
                continue
            try:
                far = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                _reset(near)
                continue
            with self._lock:
                self._open += [near, far]
            for a, b in ((near, far), (far, near)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with self._lock:
            passing = sink in self._open  # else cut: no goodbye
        if passing:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

    def cut(self) -> None:
        with self._lock:
            dropped, self._open = self._open, []
        for s in dropped:
            with contextlib.suppress(OSError):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.shutdown(socket.SHUT_RD)  # wakes its pump's recv (a close from another thread would not)
        for s in dropped:
            _reset(s)
        self.cuts += 1

    def block(self) -> None:
        self.blocked = True
        self.cut()

    def unblock(self) -> None:
        self.blocked = False

    def close(self) -> None:
        self.listener.close()
        self.cut()


def _reset(s: socket.socket) -> None:
    """Closed with a reset, not a goodbye: what the far end sees when a link fails."""
    with contextlib.suppress(OSError):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        s.close()
