// aft-server through OpenAI's official Node.js client (the `openai` package): completions, chat,
// streaming, usage, seeds, stop strings and errors, against the real binary on the shipped
// character-level model (each character one token).
//
//   AFT_SERVER=build/tools/aft-server AFT_MODEL=models/shipped/brown-decay-tiny.aft \
//     node tests/node/server_openai_test.mjs
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import OpenAI from 'openai';

import { startServer } from './aft_server.mjs';

const kKey = 'test-key-21';
const kModel = 'brown-decay-tiny.aft';  // the server names the model by its file name
let server;
let client;

before(async () => {
  assert.ok(process.env.AFT_SERVER && process.env.AFT_MODEL,
            'set AFT_SERVER (the aft-server binary) and AFT_MODEL (the shipped model)');
  server = await startServer({
    server: process.env.AFT_SERVER,
    model: process.env.AFT_MODEL,
    args: ['--api-key', kKey, '--parallel', '2'],
  });
  // No retries: a 5xx must fail the test, not be retried into a pass.
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: kKey, maxRetries: 0, timeout: 30000 });
});

after(async () => {
  if (!server) return;
  const status = await server.stop();
  assert.deepEqual(status, { code: 0, signal: null },
                   `aft-server did not exit 0 on SIGTERM\n${server.stderr()}`);
});

// The server's stderr tail, for the failure messages of requests it should have answered.
function log() {
  return `\n--- aft-server's stderr ---\n${server.stderr().slice(-4000)}`;
}

async function tokenize(content) {
  const response = await fetch(`${server.url}/tokenize`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${kKey}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ content }),
  });
  assert.equal(response.status, 200);
  return (await response.json()).tokens;
}

// A streamed completion's chunks: its text, the chunks, and the usage chunk if any.
async function collect(stream, chat) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  const withChoice = chunks.filter((chunk) => chunk.choices.length > 0);
  const text = withChoice
    .map((chunk) => (chat ? chunk.choices[0].delta.content ?? '' : chunk.choices[0].text))
    .join('');
  const usage = chunks.filter((chunk) => chunk.usage).map((chunk) => chunk.usage);
  return { chunks, withChoice, text, usage };
}

test('the model list names the served file', async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((model) => model.id), [kModel]);
});

test('a completion: text, finish_reason and usage with cached tokens', async () => {
  const prompt = 'The grand jury said';
  // A character-level model: one token per character, so every count below is known.
  assert.equal((await tokenize(prompt)).length, prompt.length);
  const request = { model: kModel, prompt, max_tokens: 20, temperature: 0 };

  const first = await client.completions.create(request);
  assert.equal(first.object, 'text_completion');
  assert.equal(first.model, kModel);
  assert.match(first.id, /^cmpl-/);
  assert.equal(first.choices.length, 1);
  const text = first.choices[0].text;
  assert.equal(text.length, 20, `20 tokens are 20 characters: ${JSON.stringify(text)}`);
  assert.equal(first.choices[0].finish_reason, 'length');
  assert.deepEqual(first.usage, {
    prompt_tokens: prompt.length,
    completion_tokens: 20,
    total_tokens: prompt.length + 20,
    prompt_tokens_details: { cached_tokens: 0 },
  });

  // Again: the state after the prompt is restored, nothing is evaluated, the text is the same.
  const again = await client.completions.create(request);
  assert.equal(again.choices[0].text, text);
  assert.equal(again.usage.prompt_tokens_details.cached_tokens, prompt.length);

  // The next turn (prompt + completion + new text) restores the state after the completion.
  const turn = `${prompt}${text} and`;
  const next = await client.completions.create({ ...request, prompt: turn, max_tokens: 5 });
  assert.equal(next.usage.prompt_tokens, turn.length);
  assert.equal(next.usage.prompt_tokens_details.cached_tokens, prompt.length + text.length);
  assert.equal(next.choices[0].text.length, 5);
});

test('a streamed completion gives the same text in chunks, then [DONE]', async () => {
  const request = {
    model: kModel, prompt: 'It was the first time', max_tokens: 30, temperature: 0,
  };
  const whole = await client.completions.create(request);
  const streamed = await collect(await client.completions.create({ ...request, stream: true }));
  assert.equal(streamed.text, whole.choices[0].text);
  assert.ok(streamed.withChoice.length >= 2, `${streamed.withChoice.length} chunks`);
  const last = streamed.chunks.at(-1);
  assert.equal(last.choices[0].finish_reason, 'length');
  for (const chunk of streamed.chunks.slice(0, -1)) {
    assert.equal(chunk.choices[0].finish_reason, null);
  }
  assert.equal(new Set(streamed.chunks.map((chunk) => chunk.id)).size, 1);
  assert.ok(streamed.chunks.every((chunk) => chunk.object === 'text_completion'));
  // No usage unless asked for.
  assert.deepEqual(streamed.usage, []);
});

test('stream_options.include_usage adds a last chunk with the usage', async () => {
  const prompt = 'In the morning the';
  const streamed = await collect(await client.completions.create({
    model: kModel, prompt, max_tokens: 12, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  }));
  const last = streamed.chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.deepEqual(last.usage, {
    prompt_tokens: prompt.length,
    completion_tokens: 12,
    total_tokens: prompt.length + 12,
    prompt_tokens_details: { cached_tokens: 0 },
  });
  assert.equal(streamed.usage.length, 1);
  assert.equal(streamed.text.length, 12);
});

test('logprobs: the client reads each token\'s log-probability and the likeliest tokens', async () => {
  const prompt = 'The jury said';
  const completion = await client.completions.create({
    model: kModel, prompt, max_tokens: 8, temperature: 0, logprobs: 3,
  });
  const logprobs = completion.choices[0].logprobs;
  assert.equal(logprobs.tokens.join(''), completion.choices[0].text);
  assert.equal(logprobs.token_logprobs.length, 8);
  logprobs.token_logprobs.forEach((logprob, i) => {
    const top = Object.values(logprobs.top_logprobs[i]);
    assert.equal(top.length, 3);
    // Greedy: the chosen token is the likeliest.
    assert.equal(logprob, Math.max(...top));
    assert.ok(logprob <= 0);
  });
  assert.equal(logprobs.text_offset[0], prompt.length);
  const chat = await client.chat.completions.create({
    model: kModel, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 5,
    temperature: 0, logprobs: true, top_logprobs: 2,
  });
  const content = chat.choices[0].logprobs.content;
  assert.equal(content.map((entry) => entry.token).join(''), chat.choices[0].message.content);
  for (const entry of content) {
    assert.equal(entry.top_logprobs.length, 2);
    assert.equal(entry.logprob, entry.top_logprobs[0].logprob);
    assert.deepEqual(entry.bytes, [...Buffer.from(entry.token)]);
  }
  const streamed = await collect(await client.chat.completions.create({
    model: kModel, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 5,
    temperature: 0, logprobs: true, top_logprobs: 2, stream: true,
  }), true);
  const streamedContent = streamed.chunks.flatMap((chunk) => chunk.choices[0]?.logprobs?.content ?? []);
  assert.deepEqual(streamedContent, content);
});

test('a seed gives the same sampled text, streamed or not; another seed other text', async () => {
  const request = { model: kModel, prompt: 'She said that', max_tokens: 40, temperature: 1 };
  const a = await client.completions.create({ ...request, seed: 7 });
  const b = await client.completions.create({ ...request, seed: 7 });
  const other = await client.completions.create({ ...request, seed: 8 });
  const streamed = await collect(
    await client.completions.create({ ...request, seed: 7, stream: true }));
  assert.equal(a.choices[0].text.length, 40);
  assert.equal(b.choices[0].text, a.choices[0].text);
  assert.equal(streamed.text, a.choices[0].text);
  assert.notEqual(other.choices[0].text, a.choices[0].text);
});

test('a stop string ends the text before it, streamed or not', async () => {
  const request = {
    model: kModel, prompt: 'The men of the county', max_tokens: 40, temperature: 0,
  };
  const full = (await client.completions.create(request)).choices[0].text;
  // A stop string the greedy text contains: 4 characters from its middle.
  const stop = full.slice(10, 14);
  const expected = full.slice(0, full.indexOf(stop));
  assert.equal(stop.length, 4);

  const stopped = await client.completions.create({ ...request, stop: ['never seen', stop] });
  assert.equal(stopped.choices[0].text, expected);
  assert.equal(stopped.choices[0].finish_reason, 'stop');
  // The tokens generated: the text kept, then the stop string (cut from the text).
  assert.equal(stopped.usage.completion_tokens, expected.length + stop.length);

  const streamed = await collect(
    await client.completions.create({ ...request, stop, stream: true }));
  assert.equal(streamed.text, expected);
  assert.equal(streamed.chunks.at(-1).choices[0].finish_reason, 'stop');
});

test('a chat completion is the completion of the plain chat template', async () => {
  const messages = [
    { role: 'system', content: 'You answer briefly.' },
    { role: 'user', content: 'Who is the jury?' },
  ];
  const prompt = 'System: You answer briefly.\nUser: Who is the jury?\nAssistant:';
  const chat = await client.chat.completions.create({
    model: kModel, messages, max_tokens: 30, temperature: 0,
  });
  assert.equal(chat.object, 'chat.completion');
  assert.match(chat.id, /^chatcmpl-/);
  assert.equal(chat.choices[0].message.role, 'assistant');
  assert.equal(chat.usage.prompt_tokens, prompt.length);
  // The same prompt as a completion, with the chat's default stop string.
  const plain = await client.completions.create({
    model: kModel, prompt, max_tokens: 30, temperature: 0, stop: '\nUser:',
  });
  assert.equal(chat.choices[0].message.content, plain.choices[0].text);
  assert.equal(chat.choices[0].finish_reason, plain.choices[0].finish_reason);
  assert.equal(chat.usage.completion_tokens, plain.usage.completion_tokens);
  assert.ok(chat.choices[0].message.content.length > 0);

  const streamed = await collect(await client.chat.completions.create({
    model: kModel, messages, max_tokens: 30, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  }), true);
  assert.equal(streamed.text, chat.choices[0].message.content);
  assert.ok(streamed.chunks.every((chunk) => chunk.object === 'chat.completion.chunk'));
  assert.equal(streamed.withChoice.at(-1).choices[0].finish_reason, chat.choices[0].finish_reason);
  assert.equal(streamed.usage.length, 1);
  assert.equal(streamed.usage[0].completion_tokens, chat.usage.completion_tokens);
  assert.equal(streamed.usage[0].prompt_tokens_details.cached_tokens, prompt.length);
});

test('n choices: each the completion of its own seed, whole and streamed', async () => {
  const request = { model: kModel, prompt: 'The jury said', max_tokens: 10, temperature: 0.9 };
  const several = await client.completions.create({ ...request, n: 3, seed: 40 });
  assert.deepEqual(several.choices.map((choice) => choice.index), [0, 1, 2]);
  for (const [i, choice] of several.choices.entries()) {
    const alone = await client.completions.create({ ...request, seed: 40 + i });
    assert.equal(choice.text, alone.choices[0].text, `choice ${i}`);
  }
  assert.equal(several.usage.prompt_tokens, request.prompt.length);
  assert.equal(several.usage.completion_tokens, 30);

  const chunks = [];
  for await (const chunk of await client.completions.create({ ...request, n: 3, seed: 40,
                                                              stream: true })) {
    chunks.push(chunk);
  }
  for (const [i, choice] of several.choices.entries()) {
    const mine = chunks.filter((chunk) => chunk.choices[0].index === i);
    assert.equal(mine.map((chunk) => chunk.choices[0].text).join(''), choice.text, `choice ${i}`);
    assert.equal(mine.at(-1).choices[0].finish_reason, 'length');
  }

  const chat = await client.chat.completions.create({
    model: kModel, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 6, n: 2, seed: 3,
  });
  assert.deepEqual(chat.choices.map((choice) => [choice.index, choice.message.role]),
                   [[0, 'assistant'], [1, 'assistant']]);
});

test('response_format: json_object parses as one object, json_schema has its shape', async () => {
  const [quote, brace] = [(await tokenize('"'))[0], (await tokenize('}'))[0]];
  const completion = await client.chat.completions.create({
    model: kModel, messages: [{ role: 'user', content: 'Write JSON' }], max_tokens: 400, seed: 4,
    // The shipped model was not trained on JSON: nudged to close its strings and objects.
    logit_bias: { [quote]: 5, [brace]: 5 },
    response_format: { type: 'json_object' },
  });
  assert.equal(completion.choices[0].finish_reason, 'stop', log());
  const parsed = JSON.parse(completion.choices[0].message.content);
  assert.equal(typeof parsed, 'object');
  assert.ok(parsed !== null && !Array.isArray(parsed));

  // A schema, as OpenAI's structured outputs send it: the object has its shape and key order.
  const shaped = await client.chat.completions.create({
    model: kModel, messages: [{ role: 'user', content: 'Give a verdict' }], max_tokens: 400,
    seed: 4, logit_bias: { [quote]: 3 },
    response_format: {
      type: 'json_schema',
      json_schema: {
        name: 'verdict', strict: true,
        schema: {
          type: 'object', additionalProperties: false, required: ['verdict', 'count'],
          properties: { verdict: { enum: ['guilty', 'not guilty'] }, count: { type: 'integer' } },
        },
      },
    },
  });
  assert.equal(shaped.choices[0].finish_reason, 'stop', log());
  const verdict = JSON.parse(shaped.choices[0].message.content);
  assert.deepEqual(Object.keys(verdict), ['verdict', 'count']);
  assert.ok(['guilty', 'not guilty'].includes(verdict.verdict));
  assert.ok(Number.isInteger(verdict.count));
});

// The client's error class for a status, with the error object's fields.
async function rejectsWith(promise, ErrorClass, status, fields) {
  await assert.rejects(promise, (error) => {
    assert.ok(error instanceof ErrorClass, `${error.constructor.name}: ${error.message}${log()}`);
    assert.ok(error instanceof OpenAI.APIError);
    assert.equal(error.status, status);
    for (const [name, value] of Object.entries(fields)) assert.equal(error[name], value, name);
    assert.ok(error.message.length > 0);
    return true;
  });
}

test('invalid fields: 400 BadRequestError naming the field', async () => {
  await rejectsWith(client.completions.create({ model: kModel, prompt: 'x', temperature: 'hot' }),
                    OpenAI.BadRequestError, 400,
                    { param: 'temperature', type: 'invalid_request_error' });
  await rejectsWith(client.completions.create({ model: kModel, prompt: 'x', max_tokens: 0 }),
                    OpenAI.BadRequestError, 400, { param: 'max_tokens' });
  await rejectsWith(client.completions.create({ model: kModel, prompt: 'x', stop: [''] }),
                    OpenAI.BadRequestError, 400, { param: 'stop' });
  await rejectsWith(client.completions.create({ model: kModel, prompt: 'x', n: 17 }),
                    OpenAI.BadRequestError, 400, { param: 'n' });
  await rejectsWith(client.completions.create({ model: kModel, prompt: 'x', n: 3, best_of: 2 }),
                    OpenAI.BadRequestError, 400, { param: 'best_of' });
  await rejectsWith(client.chat.completions.create({
    model: kModel, messages: [{ role: 'robot', content: 'hi' }],
  }), OpenAI.BadRequestError, 400, { param: 'messages' });
  // Streamed requests are checked before the stream starts: a status, not an event.
  await rejectsWith(client.completions.create({ model: kModel, prompt: '', stream: true }),
                    OpenAI.BadRequestError, 400, { param: 'prompt' });
});

test('a wrong API key: 401 AuthenticationError', async () => {
  const stranger = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await rejectsWith(stranger.completions.create({ model: kModel, prompt: 'x' }),
                    OpenAI.AuthenticationError, 401, { type: 'authentication_error' });
  await rejectsWith(stranger.models.list(), OpenAI.AuthenticationError, 401, {});
});

test('a route the server lacks: 404 NotFoundError', async () => {
  await rejectsWith(client.embeddings.create({ model: kModel, input: 'The jury' }),
                    OpenAI.NotFoundError, 404, { type: 'not_found_error' });
});
