"""A speculative-decoding server and SGLang's bench_serving ITL arithmetic, as real processes.

A real SGLang server cannot run here (no GPU). This stand-in keeps the two things the EAGLE-3
decomposition depends on:

* the server streams a request's tokens one verify *cycle* at a time: every `--cycle-ms`
  milliseconds it sends the tokens that cycle accepted (`--accept` on average: 1.5 alternates
  chunks of 1 and 2 tokens), as SGLang's streaming /generate does with speculative decoding;
* the client measures each chunk's gap and records ITL **per token** exactly as bench_serving's
  sglang backend does (sglang 0.5.23 sglang/benchmark/serving.py: `adjust_itl = chunk_gap /
  num_new_tokens; output.itl.extend([adjust_itl] * num_new_tokens)`), then prints the
  "Serving Benchmark Result" block in bench_serving's format (labels as in that file's
  print section: "Median ITL (ms):", "Accept length:", "Output token throughput (tok/s):").

Run: `python spec_serving.py --cycle-ms 6 --accept 3 [--requests 4] [--tokens 48]`: starts the
server as a child process on 127.0.0.1, benchmarks it, stops it.
"""
from __future__ import annotations

import argparse
import http.client
import http.server
import json
import statistics
import subprocess
import sys
import time


def _chunks(accept: float, tokens: int):
    """Token counts of successive cycles whose mean is `accept` (1.5 -> 1, 2, 1, 2, ...)."""
    low = int(accept)
    frac = accept - low
    given, owed, out = 0, 0.0, []
    while given < tokens:
        owed += frac
        n = low + (1 if owed >= 1 - 1e-9 else 0)
        if owed >= 1 - 1e-9:
            owed -= 1
        n = max(1, min(n, tokens - given))
        out.append(n)
        given += n
    return out


def serve(cycle_ms: float, accept: float) -> None:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def do_POST(self):  # noqa: N802 - http.server's name
            length = int(self.headers.get("Content-Length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
            tokens = int(request.get("max_new_tokens", 48))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            done = 0
            next_at = time.perf_counter()
            for n in [1] + _chunks(accept, tokens - 1):  # the first token comes from prefill
                next_at += cycle_ms / 1000.0
                delay = next_at - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                done += n
                line = "data: " + json.dumps({"text": "x" * done, "meta_info": {"completion_tokens": done}}) + "\n\n"
                data = line.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


def _one_request(port: int, tokens: int):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = json.dumps({"max_new_tokens": tokens})
    start = time.perf_counter()
    conn.request("POST", "/generate", body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    itl, ttft, last_len, last_time = [], 0.0, 0, start
    buffer = b""
    while True:
        chunk = response.read1(65536) if hasattr(response, "read1") else response.read(65536)
        if not chunk:
            break
        buffer += chunk
        while b"\n\n" in buffer:
            event, buffer = buffer.split(b"\n\n", 1)
            if not event.startswith(b"data: "):
                continue
            now = time.perf_counter()
            output_len = json.loads(event[6:])["meta_info"]["completion_tokens"]
            if ttft == 0.0:
                ttft = now - start
            else:
                new = output_len - last_len
                if new == 0:
                    continue
                adjust_itl = (now - last_time) / new  # bench_serving: per token, not per chunk
                itl.extend([adjust_itl] * new)
            last_time, last_len = now, output_len
    conn.close()
    return itl, last_len, time.perf_counter() - start


def bench(port: int, requests: int, tokens: int, accept: float) -> None:
    itls, total_tokens = [], 0
    start = time.perf_counter()
    for _ in range(requests):
        itl, produced, _ = _one_request(port, tokens)
        itls += itl
        total_tokens += produced
    duration = time.perf_counter() - start
    print("============ Serving Benchmark Result ============")
    print("{:<40} {:<10}".format("Backend:", "sglang"))
    print("{:<40} {:<10}".format("Successful requests:", requests))
    print("{:<40} {:<10.2f}".format("Benchmark duration (s):", duration))
    print("{:<40} {:<10}".format("Total generated tokens:", total_tokens))
    print("{:<40} {:<10.2f}".format("Output token throughput (tok/s):", total_tokens / duration))
    print("{:<40} {:<10.2f}".format("Accept length:", accept))
    print("{s:{c}^{n}}".format(s="Inter-Token Latency", n=50, c="-"))
    print("{:<40} {:<10.2f}".format("Mean ITL (ms):", statistics.mean(itls) * 1000))
    print("{:<40} {:<10.2f}".format("Median ITL (ms):", statistics.median(itls) * 1000))
    print("=" * 50)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--cycle-ms", type=float, required=True)
    parser.add_argument("--accept", type=float, required=True)
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=48)
    args = parser.parse_args()
    if args.serve:
        serve(args.cycle_ms, args.accept)
        return
    server = subprocess.Popen([sys.executable, __file__, "--serve", "--cycle-ms", str(args.cycle_ms),
                               "--accept", str(args.accept)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        bench(port, args.requests, args.tokens, args.accept)
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
