#!/usr/bin/env bash
# aft-server's raw HTTP with curl: /health, the API key, unknown routes, malformed JSON, body
# limits, a form-encoded body, server-sent events' framing, /tokenize and /detokenize, /metrics;
# then SIGTERM and exit status 0. JSON is checked with Python.
# Usage: tests/server_curl_test.sh AFT_SERVER MODEL (a character-level model: the shipped
# models/shipped/brown-decay-tiny.aft). Exits 77 (skipped) when curl is missing.
set -euo pipefail

server="$1"
model="$2"
python=/usr/bin/python3
command -v curl > /dev/null ||
  { echo "skipped: curl is not installed (tools/install-deps.sh installs it)"; exit 77; }

dir="$(mktemp -d)"
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2> /dev/null; then kill -KILL "$pid"; fi
  rm -rf "$dir"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  echo "--- the last response ---" >&2
  cat "$dir/headers" "$dir/body" >&2 2> /dev/null || true
  echo "--- aft-server's stderr ---" >&2
  tail -n 40 "$dir/stderr" >&2
  exit 1
}

key="curl-test-key"
"$server" "$model" --host 127.0.0.1 --port 0 --api-key "$key" --parallel 3 \
  --max-body-bytes 65536 2> "$dir/stderr" &
pid=$!
# The line comes once the model is loaded and warmed up.
base=""
for _ in $(seq 600); do
  base="$(grep -o 'listening on http://[0-9.]*:[0-9]*' "$dir/stderr" | cut -d' ' -f3)" || true
  [ -n "$base" ] && break
  kill -0 "$pid" 2> /dev/null || fail "aft-server exited before listening"
  sleep 0.1
done
[ -n "$base" ] || fail "no 'listening on' line within 60 s"

# request METHOD PATH [curl arguments...]: the body in $dir/body, the headers in $dir/headers,
# the status in $status.
status=""
request() {
  local method="$1" path="$2"
  shift 2
  status="$(curl -sS -X "$method" -o "$dir/body" -D "$dir/headers" -w '%{http_code}' \
    --max-time 30 "$@" "$base$path")"
}
auth=(-H "Authorization: Bearer $key")
json=(-H "Content-Type: application/json")

expect_status() {
  [ "$status" = "$1" ] || fail "$2: status $status, expected $1"
}
# check_json DESCRIPTION PYTHON-EXPRESSION: the expression over the body parsed as `b` holds.
check_json() {
  "$python" -c '
import json, sys
b = json.load(open(sys.argv[1]))
sys.exit(0 if eval("(" + sys.argv[2] + ")") else 1)' "$dir/body" "$2" || fail "$1: not ($2)"
}
# check_error DESCRIPTION TYPE: the body is an OpenAI error object of this type.
check_error() {
  check_json "$1" "set(b) == {'error'} and b['error']['message'] != '' and
    set(b['error']) == {'message', 'type', 'param', 'code'} and b['error']['type'] == '$2'"
}
# quoted TEXT: TEXT as a JSON (and Python) string literal.
quoted() {
  "$python" -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$1"
}
check_header() {
  grep -qi "^$1: $2" "$dir/headers" || fail "header $1: expected $2"
}

request GET /health
expect_status 200 "/health without a key"
check_json "/health" "b == {'status': 'ok'}"

request GET /v1/models
expect_status 401 "no API key"
check_error "no API key" authentication_error
check_json "no API key" "'no API key' in b['error']['message']"
request GET /v1/models -H "Authorization: Bearer wrong"
expect_status 401 "a wrong API key"
check_json "a wrong API key" "'wrong' in b['error']['message']"

request GET /v1/models "${auth[@]}"
expect_status 200 "/v1/models"
check_json "/v1/models" "[m['id'] for m in b['data']] == ['$(basename "$model")']"

request GET /v1/nothing "${auth[@]}"
expect_status 404 "an unknown route"
check_error "an unknown route" not_found_error
check_json "an unknown route" "b['error']['message'] == 'unknown route: GET /v1/nothing'"

request POST /v1/completions "${auth[@]}" "${json[@]}" -d '{"prompt": "The jury", '
expect_status 400 "malformed JSON"
check_error "malformed JSON" invalid_request_error
check_json "malformed JSON" "'not valid JSON' in b['error']['message']"
check_json "malformed JSON" "b['error']['param'] is None"

# --max-body-bytes 65536: a body one byte over is refused, one at the limit is served (padded
# with spaces, which JSON allows).
padded() { # padded SIZE: a completion request of exactly SIZE bytes
  local head='{"prompt": "The jury", "max_tokens": 3, "temperature": 0'
  "$python" -c 'import sys; head, n = sys.argv[1], int(sys.argv[2])
sys.stdout.write(head + " " * (n - len(head) - 1) + "}")' "$head" "$1"
}
padded 65537 > "$dir/over.json"
padded 65536 > "$dir/limit.json"
request POST /v1/completions "${auth[@]}" "${json[@]}" --data-binary "@$dir/over.json"
expect_status 413 "a body over --max-body-bytes"
check_error "a body over --max-body-bytes" invalid_request_error
check_json "413" "'65536 bytes (--max-body-bytes)' in b['error']['message']"
request POST /v1/completions "${auth[@]}" "${json[@]}" --data-binary "@$dir/limit.json"
expect_status 200 "a body of --max-body-bytes"
check_json "a body of --max-body-bytes" "len(b['choices'][0]['text']) == 3"

# curl -d without a type sends application/x-www-form-urlencoded: the body is still the JSON.
body='{"prompt": "The jury said", "max_tokens": 12, "temperature": 0}'
request POST /v1/completions "${auth[@]}" "${json[@]}" -d "$body"
expect_status 200 "a JSON completion"
check_json "a JSON completion" "b['usage']['completion_tokens'] == 12"
check_json "a JSON completion" "len(b['choices'][0]['text']) == 12"
text="$("$python" -c 'import json, sys
print(json.load(open(sys.argv[1]))["choices"][0]["text"], end="")' "$dir/body")"
request POST /v1/completions "${auth[@]}" -d "$body"
expect_status 200 "a form-encoded completion"
check_header Content-Type application/json
check_json "a form-encoded completion" "b['choices'][0]['text'] == $(quoted "$text")"
# httplib caps form bodies at 8 KiB, whatever --max-body-bytes: a 413 that says what to do.
request POST /v1/completions "${auth[@]}" --data-binary "@$dir/limit.json"
expect_status 413 "a form-encoded body over 8 KiB"
check_json "a form body over 8 KiB" "'Content-Type: application/json' in b['error']['message']"

# Server-sent events: only "data: " lines (or ": " comments), each event one line and a blank
# line, JSON chunks, then "data: [DONE]" last; the text is the non-streamed one.
request POST /v1/completions "${auth[@]}" "${json[@]}" -N \
  -d '{"prompt": "The jury said", "max_tokens": 12, "temperature": 0, "stream": true,
       "stream_options": {"include_usage": true}}'
expect_status 200 "a streamed completion"
check_header Content-Type text/event-stream
"$python" - "$dir/body" "$text" << 'EOF' || fail "the event stream's framing"
import json, sys
raw = open(sys.argv[1], encoding="utf-8").read()
assert raw.endswith("data: [DONE]\n\n"), repr(raw[-40:])
events = [e for e in raw.split("\n\n")[:-1] if not e.startswith(": ")]
assert all("\n" not in e and e.startswith("data: ") for e in events), events
assert events[-1] == "data: [DONE]" and events.count("data: [DONE]") == 1
chunks = [json.loads(e[len("data: "):]) for e in events[:-1]]
text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
assert text == sys.argv[2], (text, sys.argv[2])
assert chunks[-2]["choices"][0]["finish_reason"] == "length"
assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 12
assert chunks[-1]["usage"]["prompt_tokens"] == len("The jury said")
assert len({c["id"] for c in chunks}) == 1
EOF

# /tokenize and /detokenize: one token per character, and back.
content='The jury said, in 1962: "the city'"'"'s elections."'
request POST /tokenize "${auth[@]}" "${json[@]}" --data-binary "{\"content\": $(quoted "$content")}"
expect_status 200 "/tokenize"
check_json "/tokenize" "len(b['tokens']) == ${#content}"
check_json "/tokenize" "all(type(t) is int for t in b['tokens'])"
cp "$dir/body" "$dir/tokens.json"
request POST /detokenize "${auth[@]}" "${json[@]}" --data-binary "@$dir/tokens.json"
expect_status 200 "/detokenize"
check_json "/detokenize" "b == {'content': $(quoted "$content")}"
request POST /detokenize "${auth[@]}" "${json[@]}" -d '{"tokens": [-1]}'
expect_status 400 "/detokenize of a token id out of range"
check_json "/detokenize of -1" "b['error']['param'] == 'tokens'"

# /metrics: Prometheus' text, counting what was asked above: 4 completions answered (3 + 12 +
# 12 + 12 tokens: the body at the limit, JSON, form, streamed), 1 refused (the malformed JSON;
# 401, 404 and 413 are refused before any route).
request GET /metrics "${auth[@]}"
expect_status 200 "/metrics"
check_header Content-Type "text/plain; version=0.0.4"
"$python" - "$dir/body" << 'EOF' || fail "/metrics"
import sys
values, types = {}, {}
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if line.startswith("# TYPE "):
        _, _, name, kind = line.split(" ")
        types[name] = kind
    elif line and not line.startswith("#"):
        name, value = line.split(" ")
        values[name] = float(value)
counters = ["requests", "requests_failed", "prompt_tokens", "completion_tokens", "cached_tokens",
            "prefill_tokens", "prefill_seconds", "decode_tokens", "decode_seconds", "cache_hits",
            "cache_misses"]
gauges = ["prefill_tokens_per_second", "decode_tokens_per_second", "cache_bytes", "cache_entries",
          "queue_depth", "active_slots", "slots"]
for name in counters:
    assert types.get(f"aft_{name}_total") == "counter", name
for name in gauges:
    assert types.get(f"aft_{name}") == "gauge", name
assert set(values) == set(types), set(values) ^ set(types)
expected = {"aft_requests_total": 4, "aft_requests_failed_total": 1,
            "aft_completion_tokens_total": 3 + 12 * 3, "aft_prompt_tokens_total": 8 + 13 * 3,
            "aft_slots": 3, "aft_active_slots": 0, "aft_queue_depth": 0}
for name, value in expected.items():
    assert values[name] == value, (name, values[name], value)
# The same prompt three times: evaluated once, then restored.
assert values["aft_cached_tokens_total"] >= 13 * 2, values["aft_cached_tokens_total"]
assert values["aft_cache_hits_total"] >= 2 and values["aft_cache_entries"] > 0
assert values["aft_decode_tokens_total"] > 0 and values["aft_decode_seconds_total"] > 0
EOF

kill -TERM "$pid"
code=0
wait "$pid" || code=$?
pid=""
[ "$code" = 0 ] || fail "aft-server exited with $code on SIGTERM"
grep -q "stopping (SIGTERM)" "$dir/stderr" || fail "no 'stopping (SIGTERM)' line"
echo "server_curl_test: all checks passed"
