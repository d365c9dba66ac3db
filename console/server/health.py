"""How pivot asks a managed server whether it serves: through an SSH port forward from its host to the server's own
health endpoint, on one kept-alive HTTP connection (a 1 s poll opens no SSH session), and what model it serves."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import TYPE_CHECKING

from console.engines import engine
from console.remote import Connection, PortForward
from console.remote.errors import RemoteError
from console.server.state import NoHealthRoute, ServerRecord
from console.untrusted import visible

if TYPE_CHECKING:  # imported where a health check needs it: `pivot --help` and the first screen do not wait
    import httpx


MAX_BODY = 1 << 20  # what pivot reads of a server's answer about itself, after decompression


class BodyTooLarge(Exception):
    pass


async def bounded_get(client: httpx.AsyncClient, path: str, *, limit: int = MAX_BODY, timeout: float = 10) -> bytes:
    """A GET's body of at most `limit` bytes once decompressed, within `timeout` in all; redirects are not followed
    (httpx's default), and a body past the bound raises BodyTooLarge rather than grow the console."""
    body = bytearray()
    async with asyncio.timeout(timeout), client.stream("GET", path) as response:
        response.raise_for_status()
        async for part in response.aiter_bytes():
            body += part
            if len(body) > limit:
                raise BodyTooLarge(f"{path}: the answer is over {limit // 1024} KiB")
    return bytes(body)


class HealthProbe:
    """The forward and the HTTP client of a server's health checks (ServerLifecycle's)."""

    conn: Connection
    _forward: PortForward | None
    _http: httpx.AsyncClient | None
    _http_lock: asyncio.Lock

    @property
    def server_address(self) -> str:
        """Where the host reaches its server: itself (a Slurm job's first node: SlurmLifecycle's)."""
        return "127.0.0.1"

    async def _health(self, record: ServerRecord) -> tuple[bool, str]:
        """Each health path in turn: 200 is ready, 404 (no such route on this server) asks the next, anything else
        is not ready yet (503 while the model loads)."""
        import httpx  # (the console's Server pane imports it in a thread first: console/ui/widgets/server/pane.py)

        try:
            async with self._http_lock:
                client = await self._client(self.server_address, record.port)
                for path in record.health_paths:
                    async with asyncio.timeout(10), client.stream("GET", path) as response:  # the status alone: a body
                        status = response.status_code  # that never ends, or inflates to a GiB, is never read
                    if 300 <= status < 400:
                        return False, f"{visible(path)} answered {status}, a redirect: pivot follows none"
                    if status != 404:
                        return status == 200, f"{visible(path)} answered {status}"
            raise NoHealthRoute(
                f"{visible(', then '.join(record.health_paths))} answered 404: this server has no such "
                "route; set health_path in its profile"
            )
        except (httpx.HTTPError, httpx.InvalidURL, RemoteError, OSError, TimeoutError) as e:
            return False, f"health check failed: {type(e).__name__}"

    async def _client(self, address: str, port: int) -> httpx.AsyncClient:
        """The HTTP client of the forward to address:port (from the host): made once, its connection kept alive, so
        that a poll is one request on one forwarded channel. The forward is plain HTTP on loopback: its TLS context
        verifies against no CA (any TLS would fail, not pass), which spares loading the system's CAs, 20-40 ms of CPU
        on the loop as the first screen is drawn. No proxy from the environment (HTTP_PROXY) either: the forward is
        this machine's own port."""
        if self._forward is None or self._http is None or (self._forward.remote_host, self._forward.remote_port) != (address, port):
            import httpx

            await self._drop_forward()
            self._forward = await self.conn.forward(address, port)
            no_ca = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            self._http = httpx.AsyncClient(base_url=self._forward.url, timeout=5.0, verify=no_ca, trust_env=False)
        return self._http

    async def _model_name(self, record: ServerRecord) -> str | None:
        """The model as the engine tells it (console/engines/: some from the command line, not over HTTP)."""
        import httpx

        async with self._http_lock:
            if (http := self._http) is None:
                return None
            with contextlib.suppress(
                httpx.HTTPError, ValueError, KeyError, IndexError, TypeError, AttributeError, TimeoutError, BodyTooLarge
            ):
                name = await engine(record.kind).served_model(record.argv, lambda path: bounded_get(http, path))
                return visible(name) if name is not None else None
        return None

    async def _forget_forward(self) -> None:
        async with self._http_lock:
            await self._drop_forward()

    async def _drop_forward(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()
        if self._forward is not None:
            self._forward.close()
            self._forward = None
