"""`--sglang-url` against a real HTTP server on 127.0.0.1 that answers like SGLang does.

No SGLang server can run here (no GPU), so a stdlib http.server serves answers shaped
like the real routes (read from SGLang's source, srt/entrypoints/http_server.py):
- 0.5.23 `/server_info`: ServerArgs.resolved_dict() + "launch_command" + scheduler info
  + "kv_events" + "startup_time" + "internal_states" (a list, one per DP rank, each
  repeating the server args plus its own state) + "version" + "frontend";
  `/get_server_info` is a deprecated alias.
- 0.4.6 `/get_server_info` only (no /server_info: 404): dataclasses.asdict(server_args)
  + scheduler info ({"status": "ready", "max_total_num_tokens", "max_req_input_len"},
  from scheduler.py run_scheduler_process) + the first scheduler's internal state merged
  flat ("last_gen_throughput", "avg_spec_accept_length") + "version".
Field names are ServerArgs fields of those versions (srt/server_args.py).
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from envsnap.capture.base import CaptureContext
from envsnap.capture.collectors import sglang

ARGS = {"model_path": "meta-llama/Llama-3.1-8B-Instruct", "tokenizer_path": "meta-llama/Llama-3.1-8B-Instruct",
        "tp_size": 2, "dp_size": 1, "attention_backend": "fa3", "speculative_algorithm": "EAGLE3",
        "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
        "cuda_graph_max_bs": 32, "disable_cuda_graph": False, "mem_fraction_static": 0.85,
        "api_key": "sk-serverkey-abcdefghijklmnop", "random_seed": 1234, "host": "127.0.0.1", "port": 30000}
SCHEDULER_INFO = {"status": "ready", "max_total_num_tokens": 412345, "max_req_input_len": 131066}


def answer_0523():
    state = dict(ARGS, last_gen_throughput=1234.5, avg_spec_accept_length=2.71,
                 memory_usage={"weight": 15.1, "kvcache": 52.3, "token_capacity": 412345, "graph": 1.2})
    return {**ARGS, "launch_command": "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                                      "--tp 2 --api-key sk-serverkey-abcdefghijklmnop",
            **SCHEDULER_INFO, "kv_events": None, "startup_time": 1764400000.5, "internal_states": [state],
            "version": "0.5.23", "frontend": "python"}


def answer_046():
    return {**ARGS, **SCHEDULER_INFO, "last_gen_throughput": 987.6, "avg_spec_accept_length": 3.1, "version": "0.4.6"}


class _Handler(BaseHTTPRequestHandler):
    routes: dict = {}
    delay = 0.0
    seen: list = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.seen.append((self.path, self.headers.get("Authorization")))
        time.sleep(self.delay)
        body = self.routes.get(self.path)
        if body is None:
            self.send_response(404)
            self.end_headers()
            self.wfile.write(b'{"detail":"Not Found"}')
            return
        status, payload = body
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(payload if isinstance(payload, bytes) else json.dumps(payload).encode())
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (the timeout test): expected

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    """A real HTTP server on an ephemeral 127.0.0.1 port; tests set its routes."""
    handler = type("Handler", (_Handler,), {"routes": {}, "delay": 0.0, "seen": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True  # a handler still sleeping (timeout test) must not hold up teardown
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield handler, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def capture(url, timeout=10.0, redact=True):
    ctx = CaptureContext(sglang_url=url, timeout=timeout, redact=redact)
    ctx.deadline = time.monotonic() + timeout
    return sglang.collect(ctx)


def test_current_server_info_route(server):
    handler, url = server
    handler.routes["/server_info"] = (200, answer_0523())
    result = capture(url + "/")
    assert result["status"] == "ok", result
    data = result["data"]
    assert data["endpoint"] == "/server_info" and data["url"] == url and data["version"] == "0.5.23"
    assert data["server_args"]["tp_size"] == 2 and data["server_args"]["speculative_algorithm"] == "EAGLE3"
    assert data["scheduler_info"] == SCHEDULER_INFO
    assert "version" not in data["server_args"] and "internal_states" not in data["server_args"]
    (state,) = data["internal_states"]
    assert state["avg_spec_accept_length"] == 2.71 and state["memory_usage"]["token_capacity"] == 412345
    assert "tp_size" not in state  # the server args each state repeats are not kept twice
    assert data["server_args"]["api_key"].startswith("redacted:")
    assert "sk-serverkey-abcdefghijklmnop" not in json.dumps(data)
    assert "--tp 2" in data["launch_command"]
    summary = sglang.summarize(data)
    assert summary[0].startswith("SGLang 0.5.23 at") and "tp_size=2" in summary[0]
    assert summary[1] == "DP0: avg_spec_accept_length=2.71 (since the server started), last_gen_throughput=1234"


def test_old_server_falls_back_to_get_server_info(server):
    handler, url = server
    handler.routes["/get_server_info"] = (200, answer_046())
    result = capture(url.replace("http://", ""))  # no scheme: http assumed
    assert result["status"] == "ok", result
    data = result["data"]
    assert data["endpoint"] == "/get_server_info" and data["version"] == "0.4.6"
    # then /metrics, which a server started without --enable-metrics does not serve
    assert [p for p, _ in handler.seen] == ["/server_info", "/get_server_info", "/metrics"]
    assert data["metrics_unavailable"].endswith("/metrics: HTTP 404 (start the server with --enable-metrics)")
    assert data["internal_states"] == [{"last_gen_throughput": 987.6, "avg_spec_accept_length": 3.1}]
    assert "last_gen_throughput" not in data["server_args"] and data["server_args"]["random_seed"] == 1234
    assert "launch_command" not in data


def test_unreachable_server_is_unavailable():
    import socket

    with socket.socket() as sock:  # a port with nobody listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = capture(f"http://127.0.0.1:{port}")
    assert result["status"] == "unavailable" and "cannot reach" in result["reason"]
    assert not sglang.collect(CaptureContext())["status"] == "ok"
    assert sglang.collect(CaptureContext(sglang_url="ftp://x"))["status"] == "error"


def test_slow_server_is_bounded_by_the_capture_deadline(server):
    handler, url = server
    handler.routes["/server_info"] = (200, answer_0523())
    handler.delay = 3.0
    start = time.monotonic()
    result = capture(url, timeout=1.0)
    assert time.monotonic() - start < 2.5
    assert result["status"] == "unavailable" and "timed out" in result["reason"]


def test_api_key_and_bad_answers(server, monkeypatch):
    handler, url = server
    handler.routes["/server_info"] = (401, {"error": "Unauthorized"})
    result = capture(url)
    assert result["status"] == "unavailable" and "ENVSNAP_SGLANG_API_KEY" in result["reason"]
    monkeypatch.setenv("ENVSNAP_SGLANG_API_KEY", "k-123")
    handler.routes["/server_info"] = (200, b"<html>not json</html>")
    result = capture(url)
    assert result["status"] == "unavailable" and "not JSON" in result["reason"]
    assert handler.seen[-1] == ("/server_info", "Bearer k-123")
    handler.routes["/server_info"] = (200, [1, 2])
    assert capture(url)["status"] == "error"


def test_credentials_in_the_url_are_refused_without_echoing_them():
    from helpers import run_envsnap

    # The password is put together here: the capture records the uncommitted edits of envsnap's own editable
    # checkout, and an edit to this file would otherwise hold it whole.
    password = "hunter" + "2"
    result = run_envsnap("capture", "-o", "-", "--timeout", "10", "--sglang-url", f"http://bob:{password}@127.0.0.1:9/")
    assert result.returncode == 2 and result.stdout == ""  # bad input: refused before anything is captured
    assert "ENVSNAP_SGLANG_API_KEY" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert password not in result.stderr and "bob" not in result.stderr
    # A library caller (no CLI in between) gets the refusal recorded, without the credentials either.
    section = sglang.collect(CaptureContext(sglang_url=f"http://bob:{password}@127.0.0.1:9/"))
    assert section["status"] == "error" and "ENVSNAP_SGLANG_API_KEY" in section["error"]
    assert password not in json.dumps(section) and "bob" not in section["error"]
