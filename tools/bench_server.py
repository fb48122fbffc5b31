#!/usr/bin/python3
"""aft-server's figures (docs/server.md, docs/benchmarks.md): decode throughput when shared, a
chat's turns, and the memory a cached state takes.

    /usr/bin/python3 tools/bench_server.py MODEL [--server build/tools/aft-server]
        [--streams 1,4,16] [--tokens 256] [--turns 10] [--threads N] [-o md|json]

Each part starts its own server on a free loopback port and stops it with SIGTERM:

* streams: for each N, a server with --parallel N and no state cache; N clients at once each ask
  for --tokens tokens (distinct prompts, temperature 1, each its seed). Reports the aggregate
  completion tokens/s (all tokens over the wall time from the first request to the last answer)
  and the server's own decode tokens/s (its /metrics: tokens over the time in batch steps),
  each against N = 1, one session alone.
* chat: a conversation of --turns turns through /v1/chat/completions, streamed, each turn the
  messages so far (the answers as they came) and a new user message of about 200 characters.
  Reports each turn's prompt tokens, cached tokens and time to first token (client side), and the
  same last turn on a server without the cache, cold.
* memory: the state cache's bytes per entry after the chat (/metrics), the state and the last
  logits of one sequence.
Exit status: 0 success, 1 an error, 2 bad usage.
"""

from __future__ import annotations

import argparse
import http.client
import json
import platform
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

WORDS = ("the jury said it did not know what the grand old city of Atlanta would do about "
         "the election that was held last week by the county board of education").split()


class Server:
    """aft-server on --port 0; the port from its ready line."""

    def __init__(self, binary: str, model: str, args: list[str]):
        self.process = subprocess.Popen([binary, model, "--port", "0", *args],
                                        stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        self.log = []
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line:
                break
            self.log.append(line)
            found = re.search(r"listening on http://[^:]+:(\d+)", line)
            if found:
                self.port = int(found.group(1))
                threading.Thread(target=self.process.stderr.read, daemon=True).start()
                return
        self.process.kill()
        raise RuntimeError("aft-server did not start:\n" + "".join(self.log))

    def request(self, method: str, path: str, body: dict | None = None):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        connection.request(method, path, body=None if body is None else json.dumps(body),
                           headers={"Content-Type": "application/json"})
        return connection, connection.getresponse()

    def post(self, path: str, body: dict) -> dict:
        connection, response = self.request("POST", path, body)
        data = response.read()
        connection.close()
        if response.status != 200:
            raise RuntimeError(f"{path}: HTTP {response.status}: {data[:300]!r}")
        return json.loads(data)

    def metrics(self) -> dict[str, float]:
        connection, response = self.request("GET", "/metrics")
        text = response.read().decode()
        connection.close()
        return {name: float(value) for name, value in
                re.findall(r"^aft_(\w+) ([0-9.eE+-]+)$", text, re.MULTILINE)}

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        if self.process.wait(timeout=30) != 0:
            raise RuntimeError(f"aft-server exited with {self.process.returncode}")


def streams(args, n: int) -> dict:
    server = Server(args.server, args.model, ["--parallel", str(n), "--state-cache-mib", "0",
                                              *args.server_args])
    try:
        before = server.metrics()
        answers = [None] * n

        def client(i: int) -> None:
            answers[i] = server.post("/v1/completions", {
                "prompt": f"{i}: " + " ".join(WORDS[i % 7:i % 7 + 6]), "max_tokens": args.tokens,
                "temperature": 1.0, "seed": i + 1})

        threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - start
        after = server.metrics()
    finally:
        server.stop()
    tokens = sum(answer["usage"]["completion_tokens"] for answer in answers)
    decoded = after["decode_tokens_total"] - before["decode_tokens_total"]
    seconds = after["decode_seconds_total"] - before["decode_seconds_total"]
    return {"streams": n, "tokens": tokens, "wall_s": wall, "tokens_per_s": tokens / wall,
            "decode_tokens_per_s": decoded / seconds}


def chat_turn(server: Server, messages: list[dict], max_tokens: int) -> dict:
    """Streams one turn; the time to its first text and its usage."""
    start = time.perf_counter()
    connection, response = server.request("POST", "/v1/chat/completions", {
        "messages": messages, "max_tokens": max_tokens, "temperature": 0.7, "seed": 1,
        "stream": True, "stream_options": {"include_usage": True}})
    if response.status != 200:
        raise RuntimeError(f"chat: HTTP {response.status}: {response.read()[:300]!r}")
    first = None
    text = ""
    usage = None
    for raw in response:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line[6:])
        if event.get("usage"):
            usage = event["usage"]
        for choice in event.get("choices", []):
            piece = choice.get("delta", {}).get("content")
            if piece:
                first = first or time.perf_counter() - start
                text += piece
    connection.close()
    return {"ttft_ms": 1000 * (first or time.perf_counter() - start), "text": text,
            "prompt_tokens": usage["prompt_tokens"],
            "cached_tokens": usage["prompt_tokens_details"]["cached_tokens"]}


def chat(args) -> dict:
    def user_message(turn: int) -> str:
        words = [WORDS[(turn * 7 + k) % len(WORDS)] for k in range(40)]
        return f"Turn {turn}: " + " ".join(words)[:190] + "?"

    server = Server(args.server, args.model, args.server_args)
    turns = []
    messages = [{"role": "system", "content": "You answer about the news of the day."}]
    try:
        for turn in range(1, args.turns + 1):
            messages.append({"role": "user", "content": user_message(turn)})
            result = chat_turn(server, messages, 64)
            messages.append({"role": "assistant", "content": result.pop("text")})
            turns.append({"turn": turn, **result})
        metrics = server.metrics()
    finally:
        server.stop()
    cold_server = Server(args.server, args.model, ["--state-cache-mib", "0", *args.server_args])
    try:
        cold = chat_turn(cold_server, messages[:-1], 64)
        cold.pop("text")
    finally:
        cold_server.stop()
    return {"turns": turns, "last_turn_cold": cold,
            "cache_bytes_per_entry": metrics["cache_bytes"] / max(metrics["cache_entries"], 1),
            "cache_entries": metrics["cache_entries"]}


def int_list(text: str) -> list[int]:
    try:
        values = [int(item) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, found {text!r}")
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError("expected positive integers")
    return values


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="bench_server", description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--server", default="build/tools/aft-server")
    parser.add_argument("--streams", type=int_list, default=[1, 4, 16])
    parser.add_argument("--tokens", type=int, default=256, help="tokens per stream (default 256)")
    parser.add_argument("--turns", type=int, default=10,
                        help="the chat's turns (default 10; 0: no chat, for models whose position "
                             "limit a long chat passes)")
    parser.add_argument("--threads", type=int, help="the server's --threads")
    parser.add_argument("-o", choices=("md", "json"), default="md")
    args = parser.parse_args(argv)
    if not Path(args.server).is_file() or not Path(args.model).is_file():
        parser.error("the server binary or the model file does not exist")
    args.server_args = [] if args.threads is None else ["--threads", str(args.threads)]
    try:
        shared = [streams(args, n) for n in args.streams]
        conversation = chat(args) if args.turns > 0 else None
    except (RuntimeError, OSError) as error:
        print(f"bench_server: error: {error}", file=sys.stderr)
        return 1
    if args.o == "json":
        print(json.dumps({"machine": platform.processor() or platform.machine(),
                          "streams": shared, "chat": conversation}, indent=1))
        return 0
    alone = shared[0]
    print(f"{Path(args.model).name}, {args.tokens} tokens per stream\n")
    print("| streams | tokens/s (all) | x alone | server decode tokens/s | x alone |")
    print("|---|---|---|---|---|")
    for row in shared:
        print(f"| {row['streams']} | {row['tokens_per_s']:,.0f} | "
              f"{row['tokens_per_s'] / alone['tokens_per_s']:.2f} | "
              f"{row['decode_tokens_per_s']:,.0f} | "
              f"{row['decode_tokens_per_s'] / alone['decode_tokens_per_s']:.2f} |")
    if conversation is None:
        return 0
    print("\n| turn | prompt tokens | cached | time to first token (ms) |")
    print("|---|---|---|---|")
    for turn in conversation["turns"]:
        print(f"| {turn['turn']} | {turn['prompt_tokens']:,} | {turn['cached_tokens']:,} | "
              f"{turn['ttft_ms']:.1f} |")
    cold = conversation["last_turn_cold"]
    print(f"| {args.turns}, no cache | {cold['prompt_tokens']:,} | {cold['cached_tokens']} | "
          f"{cold['ttft_ms']:.1f} |")
    print(f"\nstate cache: {conversation['cache_bytes_per_entry']:,.0f} bytes per entry "
          f"({conversation['cache_entries']:.0f} entries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
