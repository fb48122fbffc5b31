// A bounded load test of aft-server with autocannon: it starts its own server on a loopback port,
// posts /v1/completions with a different short prompt each time (so that the prefix cache does
// not answer them) from --connections connections for --seconds, prints the requests, failures,
// latency percentiles, requests/s and completion tokens/s (from the responses' usage) as a table
// and a JSON line, and exits 1 on any error, timeout, non-2xx status or unexpected body.
//
//   node tests/node/server_load.mjs --server build/tools/aft-server \
//     --model models/shipped/brown-decay-tiny.aft [--seconds 30] [--connections 32] \
//     [--max-tokens 16] [--parallel 4]
import { parseArgs } from 'node:util';

import autocannon from 'autocannon';

import { startServer } from './aft_server.mjs';

const { values: options } = parseArgs({
  options: {
    server: { type: 'string' },
    model: { type: 'string' },
    seconds: { type: 'string', default: '30' },
    connections: { type: 'string', default: '32' },
    'max-tokens': { type: 'string', default: '16' },
    parallel: { type: 'string', default: '4' },
    timeout: { type: 'string', default: '10' },
  },
});

function positive(name) {
  const value = Number(options[name]);
  if (!Number.isInteger(value) || value < 1) {
    console.error(`server_load: --${name}: expected a positive integer, found ${options[name]}`);
    process.exit(2);
  }
  return value;
}
if (!options.server || !options.model) {
  console.error('usage: node tests/node/server_load.mjs --server AFT_SERVER --model MODEL\n' +
                '         [--seconds 30] [--connections 32] [--max-tokens 16] [--parallel 4]\n' +
                '         [--timeout 10]');
  process.exit(2);
}
const seconds = positive('seconds');
const connections = positive('connections');
const maxTokens = positive('max-tokens');
const parallel = positive('parallel');
const timeout = positive('timeout');

// Short prompts of common words, each one different (its number first, so that no two share
// more than a digit or two of prefix): the server prefills every one.
const kWords = ('the jury said that of city county election state when were more man first last ' +
                'time morning house into could would people there after great before years new ' +
                'work made should through place world life public').split(' ');
let sent = 0;
function nextBody() {
  const n = sent++;
  const words = [String(n)];
  let x = Math.imul(n + 1, 0x9e3779b1) >>> 0;  // xorshift32 from the request's number
  for (let i = 0; i < 4 + (n % 5); ++i) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    words.push(kWords[x % kWords.length]);
  }
  return JSON.stringify({ prompt: words.join(' '), max_tokens: maxTokens, seed: n });
}

const kKeepAliveMax = 1000;  // aft-server's set_keep_alive_max_count (tools/aft_server.cpp)

const server = await startServer({
  server: options.server,
  model: options.model,
  args: ['--parallel', String(parallel)],
});

// Every 2xx body must be a completion of max_tokens tokens (no stop strings: it ends by length).
let completionTokens = 0;
let badBodies = 0;
let firstBadBody = '';
const errorMessages = new Map();

let result;
let exit;
try {
  const instance = autocannon({
    url: `${server.url}/v1/completions`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    connections,
    duration: seconds,
    timeout,
    // The server closes a connection after 1,000 requests (its keep-alive maximum, with
    // "Connection: close"); autocannon ignores that header, writes its next request on the closing
    // socket and then pairs each later response with the previous request's start time (latencies
    // off by one request each, growing). Reconnecting after as many requests keeps them paired.
    reconnectRate: kKeepAliveMax,
    requests: [{
      setupRequest: (request) => ({ ...request, body: nextBody() }),
      onResponse: (status, body) => {
        if (status < 200 || status > 299) return;
        let tokens = -1;
        try {
          const parsed = JSON.parse(body);
          if (typeof parsed.choices[0].text === 'string') tokens = parsed.usage.completion_tokens;
        } catch {
          // counted below
        }
        if (tokens !== maxTokens) {
          ++badBodies;
          firstBadBody ||= body.slice(0, 300);
          return;
        }
        completionTokens += tokens;
      },
    }],
  });
  instance.on('reqError', (error) => {
    errorMessages.set(error.message, (errorMessages.get(error.message) ?? 0) + 1);
  });
  result = await instance;
} finally {
  exit = await server.stop(30000);
}

const latency = result.latency;
const figures = {
  seconds: result.duration,
  connections,
  parallel,
  max_tokens: maxTokens,
  requests: result['2xx'] + result.non2xx,
  ok: result['2xx'],
  non_2xx: result.non2xx,
  errors: result.errors - result.timeouts,
  timeouts: result.timeouts,
  bad_bodies: badBodies,
  latency_ms: { p50: latency.p50, p90: latency.p90, p99: latency.p99, max: latency.max },
  requests_per_second: Number((result['2xx'] / result.duration).toFixed(1)),
  completion_tokens: completionTokens,
  completion_tokens_per_second: Number((completionTokens / result.duration).toFixed(1)),
  server_exit: exit,
};

const rows = [
  ['duration', `${figures.seconds} s, ${connections} connections, --parallel ${parallel}, ` +
               `max_tokens ${maxTokens}`],
  ['requests', `${figures.requests} (2xx ${figures.ok}, non-2xx ${figures.non_2xx})`],
  ['errors', `${figures.errors} (timeouts ${figures.timeouts}, bad bodies ${badBodies})`],
  ['latency', `p50 ${latency.p50} ms, p90 ${latency.p90} ms, p99 ${latency.p99} ms, ` +
              `max ${latency.max} ms`],
  ['requests/s', String(figures.requests_per_second)],
  ['completion tokens/s', `${figures.completion_tokens_per_second} ` +
                          `(${completionTokens} tokens)`],
];
for (const [name, value] of rows) console.log(`${name.padEnd(20)} ${value}`);
console.log(JSON.stringify(figures));

const problems = [];
if (figures.ok === 0) problems.push('no request succeeded');
if (figures.non_2xx > 0) problems.push(`${figures.non_2xx} non-2xx responses`);
if (result.errors > 0) {
  problems.push(`${result.errors} errors (${[...errorMessages].map(([m, n]) => `${n}x ${m}`)})`);
}
if (badBodies > 0) problems.push(`${badBodies} unexpected bodies, the first: ${firstBadBody}`);
if (exit.code !== 0) problems.push(`aft-server exited with ${JSON.stringify(exit)} on SIGTERM`);
if (problems.length > 0) {
  console.error(`server_load: FAILED: ${problems.join('; ')}`);
  console.error(`--- aft-server's stderr (tail) ---\n${server.stderr().slice(-3000)}`);
  process.exit(1);
}
