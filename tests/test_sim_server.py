"""The simulated SGLang server over real HTTP on loopback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from console.sim import state
from console.sim.launch_server import READY_LINE
from tests.conftest import free_port, wait_until

SPEC_FLAGS = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "{models}/draft", "--speculative-num-steps", "3"]


class Server:
    def __init__(self, proc: subprocess.Popen[bytes], url: str, log: Path):
        self.proc, self.url, self.log = proc, url, log


@pytest.fixture
def sim_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "sim"
    state.init_home(home, state.GpuSpec(count=8))
    for model in ("model", "draft"):
        (tmp_path / "models" / model).mkdir(parents=True)
    return {**os.environ, state.ENV: str(home), "PIVOT_SIM_TIME_SCALE": "20"}


@pytest.fixture
def start_server(sim_env: dict[str, str], tmp_path: Path) -> Iterator[Callable[..., Server]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(*flags: str, wait_ready: bool = True, port: int | None = None) -> Server:
        port = port or free_port()
        log = tmp_path / f"server-{port}.log"
        argv = [
            sys.executable,
            "-m",
            "console.sim.launch_server",
            "--model-path",
            str(tmp_path / "models" / "model"),
            "--port",
            str(port),
            "--tp",
            "2",
            *(f.format(models=tmp_path / "models") for f in flags),
        ]
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, env=sim_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        started.append(proc)
        server = Server(proc, f"http://127.0.0.1:{port}", log)
        if wait_ready:

            def ready() -> bool:
                assert proc.poll() is None, log.read_text()
                return READY_LINE in log.read_text()

            wait_until(ready, timeout=20, what="the server's ready line")
        return server

    yield start
    for proc in started:  # the whole group: main process and its workers
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def sse_events(response: httpx.Response) -> list[dict | str]:
    events: list[dict | str] = []
    for line in response.iter_lines():
        if not line:
            continue
        assert line.startswith("data: "), line
        data = line.removeprefix("data: ")
        events.append(data if data == "[DONE]" else json.loads(data))
    return events


def test_health_is_503_while_loading_then_200_with_the_ready_line(start_server: Callable[..., Server]) -> None:
    server = start_server(wait_ready=False)
    saw_503 = False
    deadline = time.monotonic() + 20
    while True:
        try:
            status = httpx.get(server.url + "/health").status_code
        except httpx.ConnectError:
            status = 0
        saw_503 |= status == 503
        if status == 200:
            break
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert saw_503
    assert READY_LINE in server.log.read_text()


def test_streaming_completion_has_the_openai_shape_and_usage_counts_the_tokens(start_server: Callable[..., Server]) -> None:
    server = start_server()
    body = {
        "model": "m",
        "prompt": "hello " * 40,
        "max_tokens": 40,
        "stream": True,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream("POST", server.url + "/v1/completions", json=body, timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = sse_events(response)
    assert events[-1] == "[DONE]"
    usage_event, chunks = events[-2], events[:-2]
    assert isinstance(usage_event, dict) and usage_event["choices"] == []
    assert all(c["object"] == "text_completion" and c["usage"] is None for c in chunks)  # type: ignore[index]
    text = "".join(c["choices"][0]["text"] for c in chunks)  # type: ignore[index]
    assert len(text.split()) == usage_event["usage"]["completion_tokens"] == 40
    assert usage_event["usage"]["prompt_tokens"] == 60
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == "length"  # type: ignore[index]
    assert len({c["id"] for c in chunks}) == 1  # type: ignore[index]


def test_speculative_server_sends_several_tokens_in_one_chunk(start_server: Callable[..., Server]) -> None:
    server = start_server(*SPEC_FLAGS)
    body = {"prompt": "x", "max_tokens": 120, "stream": True, "ignore_eos": True, "stream_options": {"include_usage": True}}
    with httpx.stream("POST", server.url + "/v1/completions", json=body, timeout=30) as response:
        events = sse_events(response)
    chunks = [e for e in events[:-2] if isinstance(e, dict)]
    per_chunk = [len(c["choices"][0]["text"].split()) for c in chunks]
    assert sum(per_chunk) == events[-2]["usage"]["completion_tokens"] == 120  # type: ignore[index]
    assert max(per_chunk) > 1 and len(chunks) < 120
    info = httpx.get(server.url + "/server_info").json()
    assert info["speculative_algorithm"] == "EAGLE3"
    assert 1.5 < info["internal_states"][0]["avg_spec_accept_length"] < 3.0


def test_chat_stream_with_continuous_usage(start_server: Callable[..., Server]) -> None:
    server = start_server()
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 6,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "ignore_eos": True,
    }
    with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=30) as response:
        events = sse_events(response)
    chunks = [e for e in events if isinstance(e, dict) and e["choices"]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert [c["usage"]["completion_tokens"] for c in chunks[1:]] == list(range(1, 7))
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_non_streaming_completion_and_info_endpoints(start_server: Callable[..., Server]) -> None:
    server = start_server()
    reply = httpx.post(server.url + "/v1/completions", json={"prompt": "hi", "max_tokens": 5, "ignore_eos": True}, timeout=30).json()
    assert reply["usage"]["completion_tokens"] == 5 and len(reply["choices"][0]["text"].split()) == 5
    models = httpx.get(server.url + "/v1/models").json()
    assert models["data"][0]["id"].endswith("/models/model")
    for path in ("/model_info", "/get_model_info"):
        assert httpx.get(server.url + path).json()["model_path"].endswith("/models/model")
    for path in ("/server_info", "/get_server_info"):
        info = httpx.get(server.url + path).json()
        assert info["max_running_requests"] == 256 and info["tp_size"] == 2
        assert info["internal_states"][0]["avg_spec_accept_length"] is None
    assert httpx.get(server.url + "/metrics").status_code == 404


def test_metrics_only_with_enable_metrics(start_server: Callable[..., Server]) -> None:
    server = start_server("--enable-metrics", *SPEC_FLAGS, "--speculative-adaptive")
    httpx.post(server.url + "/v1/completions", json={"prompt": "hi", "max_tokens": 20, "ignore_eos": True}, timeout=30)
    text = httpx.get(server.url + "/metrics").text
    for name in ("num_running_reqs", "num_queue_reqs", "gen_throughput", "spec_accept_length", "spec_num_steps"):
        assert f"# TYPE sglang:{name} gauge" in text
        assert f"sglang:{name}{{model_name=" in text
    assert 'sglang:spec_num_steps{model_name="' in text


def test_bad_requests_get_a_400_with_the_reason(start_server: Callable[..., Server]) -> None:
    server = start_server()
    reply = httpx.post(server.url + "/v1/completions", json={"prompt": "hi", "max_tokens": 0})
    assert reply.status_code == 400 and "max_tokens must be a positive integer" in reply.json()["message"]
    assert httpx.post(server.url + "/v1/chat/completions", json={"messages": []}).status_code == 400
    assert httpx.post(server.url + "/v1/completions", content=b"{not json").status_code == 400


def _launch(sim_env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console.sim.launch_server", *argv], env=sim_env, capture_output=True, text=True, timeout=30
    )


def test_an_unknown_flag_exits_like_sglang(sim_env: dict[str, str], tmp_path: Path) -> None:
    result = _launch(sim_env, "--model-path", str(tmp_path), "--speculative-num-stepz", "3")
    assert result.returncode == 2 and "unrecognized arguments: --speculative-num-stepz" in result.stderr


def test_a_missing_model_path_exits_with_a_clear_message(sim_env: dict[str, str], tmp_path: Path) -> None:
    result = _launch(sim_env, "--model-path", str(tmp_path / "nope"))
    assert result.returncode == 1 and "model path does not exist" in result.stderr


def test_a_port_in_use_exits_with_a_clear_message(sim_env: dict[str, str], tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _launch(sim_env, "--model-path", str(tmp_path / "models" / "model"), "--port", str(port))
    assert result.returncode == 1 and "address already in use" in result.stderr
