// The npm `openai` client against `belay serve`: only the base URL changes.
// run.sh starts belay (default models on the built-in simulator, replies
// scripted by sim-script.yaml) and sets BELAY_BASE_URL.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.env.BELAY_BASE_URL;
if (!baseURL) {
  throw new Error('BELAY_BASE_URL is not set; run test/node/run.sh');
}
const MODEL = 'gpt-4o-mini';

// client returns an OpenAI client whose fetch records every HTTP request it
// makes (the SDK retries through the same fetch, so calls.length counts
// retries too). maxRetries stays at the SDK's default (2).
function client() {
  const calls = [];
  const c = new OpenAI({
    apiKey: 'sk-node-test',
    baseURL: `${baseURL}/v1`,
    fetch: async (url, init) => {
      const res = await fetch(url, init);
      calls.push({ url: String(url), status: res.status });
      return res;
    },
  });
  return { c, calls };
}

const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather for a city.',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
      required: ['city'],
    },
  },
};

test('non-streaming chat completion', async () => {
  const { c, calls } = client();
  const { data, response } = await c.chat.completions
    .create({ model: MODEL, messages: [{ role: 'user', content: 'Say hello to the node test.' }], max_tokens: 64 })
    .withResponse();
  assert.equal(calls.length, 1);
  assert.equal(data.object, 'chat.completion');
  assert.equal(data.choices.length, 1);
  const choice = data.choices[0];
  assert.equal(choice.message.role, 'assistant');
  assert.equal(choice.finish_reason, 'stop');
  // The simulator's default reply quotes the user.
  assert.match(choice.message.content, /Say hello to the node test\./);
  assert.ok(data.usage.prompt_tokens > 0, `prompt_tokens ${data.usage.prompt_tokens}`);
  assert.ok(data.usage.completion_tokens > 0, `completion_tokens ${data.usage.completion_tokens}`);
  assert.equal(data.usage.total_tokens, data.usage.prompt_tokens + data.usage.completion_tokens);
  // belay's response headers.
  assert.match(response.headers.get('x-belay-run-id') ?? '', /^[A-Za-z0-9._:-]+$/);
  assert.equal(response.headers.get('x-belay-attempts'), '1');
  assert.equal(response.headers.get('x-belay-deployment'), `openai/${MODEL}#0`);
  assert.equal(response.headers.get('x-belay-degraded'), 'false');
});

test('streaming with include_usage: content, one usage chunk last, [DONE]', async () => {
  const { c, calls } = client();
  const stream = await c.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'Stream a greeting to the node test.' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  let content = '';
  let finish = null;
  const usages = [];
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) {
      usages.push({ usage: chunk.usage, at: chunks, choices: chunk.choices.length });
    }
    for (const ch of chunk.choices) {
      content += ch.delta?.content ?? '';
      finish = ch.finish_reason ?? finish;
    }
  }
  assert.equal(calls.length, 1);
  assert.match(content, /Stream a greeting to the node test\./);
  assert.equal(finish, 'stop');
  assert.equal(usages.length, 1, `usage chunks: ${JSON.stringify(usages)}`);
  const { usage, at, choices } = usages[0];
  assert.equal(at, chunks, 'the usage chunk is the last chunk');
  assert.equal(choices, 0, 'the usage chunk has no choices');
  assert.ok(usage.prompt_tokens > 0 && usage.completion_tokens > 0, JSON.stringify(usage));
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
});

test('streaming without include_usage carries no usage chunk', async () => {
  const { c } = client();
  const stream = await c.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'No usage please.' }],
    stream: true,
  });
  let content = '';
  for await (const chunk of stream) {
    assert.ok(!chunk.usage, `unexpected usage: ${JSON.stringify(chunk)}`);
    for (const ch of chunk.choices) content += ch.delta?.content ?? '';
  }
  assert.match(content, /No usage please\./);
});

test('tools: a tool call, then the answer from its result', async () => {
  const { c, calls } = client();
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const first = await c.chat.completions.create({ model: MODEL, messages, tools: [weatherTool] });
  const choice = first.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.tool_calls?.length, 1, JSON.stringify(choice.message));
  const call = choice.message.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  assert.match(call.id, /^call_/);
  assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris', unit: 'celsius' });

  messages.push(choice.message, { role: 'tool', tool_call_id: call.id, content: '18 C and sunny' });
  const second = await c.chat.completions.create({ model: MODEL, messages, tools: [weatherTool] });
  assert.equal(second.choices[0].finish_reason, 'stop');
  assert.equal(second.choices[0].message.content, 'Weather in Paris: 18 C and sunny');
  assert.equal(calls.length, 2);
});

test('tools, streaming: tool call deltas assemble into the call', async () => {
  const { c } = client();
  const stream = await c.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'What is the weather in Lisbon?' }],
    tools: [weatherTool],
    stream: true,
    stream_options: { include_usage: true },
  });
  const byIndex = new Map();
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    usage = chunk.usage ?? usage;
    for (const ch of chunk.choices) {
      finish = ch.finish_reason ?? finish;
      for (const tc of ch.delta?.tool_calls ?? []) {
        const cur = byIndex.get(tc.index) ?? { id: '', name: '', args: '' };
        cur.id += tc.id ?? '';
        cur.name += tc.function?.name ?? '';
        cur.args += tc.function?.arguments ?? '';
        byIndex.set(tc.index, cur);
      }
    }
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(byIndex.size, 1);
  const call = byIndex.get(0);
  assert.equal(call.name, 'get_weather');
  assert.match(call.id, /^call_/);
  assert.deepEqual(JSON.parse(call.args), { city: 'Lisbon', unit: 'celsius' });
  assert.ok(usage && usage.completion_tokens > 0, JSON.stringify(usage));
});

// expectAPIError awaits p, which must reject with an openai.APIError.
async function expectAPIError(p) {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof OpenAI.APIError, `want APIError, got ${err?.constructor?.name}: ${err}`);
    return err;
  }
  assert.fail('the request succeeded; want an APIError');
}

test('belay refusal: max turns exceeded is a 403 APIError, sent once', async () => {
  const { c, calls } = client();
  const runId = `node-test-turns-${process.pid}-${Date.now()}`;
  const opts = { headers: { 'X-Belay-Run-Id': runId, 'X-Belay-Max-Turns': '1' } };
  const body = { model: MODEL, messages: [{ role: 'user', content: 'Turn one.' }] };
  const ok = await c.chat.completions.create(body, opts).withResponse();
  assert.equal(ok.response.headers.get('x-belay-run-id'), runId);
  assert.equal(calls.length, 1);

  const err = await expectAPIError(c.chat.completions.create(body, opts));
  assert.ok(err instanceof OpenAI.PermissionDeniedError, `got ${err.constructor.name}`);
  assert.equal(err.status, 403);
  assert.equal(err.code, 'max_turns_exceeded');
  assert.equal(err.type, 'run_stopped');
  assert.equal(err.headers.get('x-should-retry'), 'false');
  assert.equal(calls.length, 2, `requests: ${JSON.stringify(calls)}`);
});

test("the run API: the agent's own client reads its run and ends it as failed", async () => {
  const { c, calls } = client();
  const runId = `node-test-end-${process.pid}-${Date.now()}`;
  const opts = { headers: { 'X-Belay-Run-Id': runId } };
  const body = { model: MODEL, messages: [{ role: 'user', content: 'One turn, then the agent gives up.' }] };
  const ok = await c.chat.completions.create(body, opts).withResponse();
  const cost = ok.response.headers.get('x-belay-cost-usd');

  const read = await c.get(`/belay/runs/${runId}`);
  assert.equal(read.object, 'belay.run');
  assert.equal(read.id, runId);
  assert.equal(read.status, 'running');
  assert.equal(read.run.turns, 1);
  assert.equal(read.cost_usd, cost);

  const ended = await c.post(`/belay/runs/${runId}/end`, { body: { status: 'failed', error: 'the agent gave up' } });
  assert.equal(ended.status, 'failed');
  assert.equal(ended.run.error, 'the agent gave up');
  assert.equal(ended.run.turns, 1);
  assert.ok(ended.run.ended, 'an ended run has its end time');

  const err = await expectAPIError(c.chat.completions.create(body, opts));
  assert.equal(err.status, 409);
  assert.equal(err.code, 'run_ended');

  const missing = await expectAPIError(c.post('/belay/runs/node-test-no-such-run/end'));
  assert.ok(missing instanceof OpenAI.NotFoundError, `got ${missing.constructor.name}`);
  assert.equal(missing.code, 'run_not_found');
  assert.equal(calls.length, 5, `requests: ${JSON.stringify(calls)}`);
});

test('belay refusal: an unknown model is a 404 NotFoundError, sent once', async () => {
  const { c, calls } = client();
  const err = await expectAPIError(
    c.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }),
  );
  assert.ok(err instanceof OpenAI.NotFoundError, `got ${err.constructor.name}`);
  assert.equal(err.status, 404);
  assert.equal(err.code, 'model_not_found');
  assert.equal(err.headers.get('x-should-retry'), 'false');
  assert.equal(calls.length, 1);
});

test('quota gone on both deployments: a 429 the SDK would retry is sent once', async () => {
  const { c, calls } = client();
  const err = await expectAPIError(
    c.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'node-test: no quota' }] }),
  );
  assert.ok(err instanceof OpenAI.RateLimitError, `got ${err.constructor.name}`);
  assert.equal(err.status, 429);
  assert.equal(err.code, 'insufficient_quota');
  assert.equal(err.headers.get('x-should-retry'), 'false');
  // belay fell back once (degraded on #0, then on #1) and gave up.
  assert.equal(err.headers.get('x-belay-attempts'), '2');
  assert.equal(calls.length, 1, `the SDK retried: ${JSON.stringify(calls)}`);
});

test('one upstream server error is retried by belay, invisibly to the client', async () => {
  const { c, calls } = client();
  const { data, response } = await c.chat.completions
    .create({ model: MODEL, messages: [{ role: 'user', content: 'node-test: one server error' }] })
    .withResponse();
  assert.equal(data.choices[0].message.content, 'Recovered after one server error.');
  assert.equal(response.headers.get('x-belay-attempts'), '2');
  assert.equal(response.headers.get('x-belay-deployment'), `openai/${MODEL}#0`);
  assert.equal(calls.length, 1);
});

// streamUntilError iterates a stream that must end with an APIError and
// returns the content received before it and the error.
async function streamUntilError(c, text) {
  const stream = await c.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: text }],
    stream: true,
  });
  let content = '';
  try {
    for await (const chunk of stream) {
      for (const ch of chunk.choices) content += ch.delta?.content ?? '';
    }
  } catch (err) {
    assert.ok(err instanceof OpenAI.APIError, `want APIError, got ${err?.constructor?.name}: ${err}`);
    return { content, err };
  }
  assert.fail(`the stream ended cleanly after ${JSON.stringify(content)}; want an error event`);
}

test('a stream cut after output started ends with an error event, not a clean end', async () => {
  const { c, calls } = client();
  const { content, err } = await streamUntilError(c, 'node-test: stream cut');
  assert.ok(content.length > 0, 'some content arrived before the cut');
  assert.ok(err.message.length > 0);
  assert.equal(calls.length, 1);
});

test("a provider's in-stream error event reaches the client as an APIError", async () => {
  const { c, calls } = client();
  const { content, err } = await streamUntilError(c, 'node-test: stream error');
  assert.ok(content.length > 0, 'some content arrived before the error');
  assert.ok(err.message.length > 0);
  assert.equal(calls.length, 1);
});

// The Responses API (POST /v1/responses) through belay, with the same client.

// The Responses API's function tool is Chat Completions' function, flattened.
const responsesWeatherTool = { type: 'function', ...weatherTool.function };

test('responses: a non-streamed response', async () => {
  const { c, calls } = client();
  const { data, response } = await c.responses
    .create({ model: MODEL, instructions: 'Be brief.', input: 'Say hello to the responses test.', max_output_tokens: 64 })
    .withResponse();
  assert.equal(calls.length, 1);
  assert.equal(data.object, 'response');
  assert.equal(data.status, 'completed');
  assert.match(data.output_text, /Say hello to the responses test\./);
  assert.ok(data.usage.input_tokens > 0 && data.usage.output_tokens > 0, JSON.stringify(data.usage));
  assert.equal(data.usage.total_tokens, data.usage.input_tokens + data.usage.output_tokens);
  assert.equal(response.headers.get('x-belay-attempts'), '1');
  assert.ok(Number(response.headers.get('x-belay-cost-usd')) > 0, response.headers.get('x-belay-cost-usd'));
});

test('responses: a function call, then the answer from its output', async () => {
  const { c, calls } = client();
  const input = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const first = await c.responses.create({ model: MODEL, input, tools: [responsesWeatherTool] });
  const fc = first.output.find((it) => it.type === 'function_call');
  assert.ok(fc, JSON.stringify(first.output));
  assert.equal(fc.name, 'get_weather');
  assert.match(fc.call_id, /^call_/);
  assert.deepEqual(JSON.parse(fc.arguments), { city: 'Paris', unit: 'celsius' });

  input.push(...first.output, { type: 'function_call_output', call_id: fc.call_id, output: '18 C and sunny' });
  const second = await c.responses.create({ model: MODEL, input, tools: [responsesWeatherTool] });
  assert.equal(second.output_text, 'Weather in Paris: 18 C and sunny');
  assert.equal(calls.length, 2);
});

test('responses, streaming: text deltas, then response.completed with usage', async () => {
  const { c } = client();
  const stream = await c.responses.create({ model: MODEL, input: 'Stream a responses answer.', stream: true });
  let text = '';
  let completed = null;
  let seq = -1;
  for await (const ev of stream) {
    assert.equal(ev.sequence_number, seq + 1, `event ${ev.type} out of order`);
    seq = ev.sequence_number;
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed') completed = ev.response;
  }
  assert.match(text, /Stream a responses answer\./);
  assert.ok(completed, 'no response.completed event');
  assert.equal(completed.output_text ?? completed.output[0].content[0].text, text);
  assert.ok(completed.usage.output_tokens > 0, JSON.stringify(completed.usage));
});

test('responses, streaming: a stream cut after output started ends with an APIError', async () => {
  const { c, calls } = client();
  const stream = await c.responses.create({ model: MODEL, input: 'node-test: stream cut', stream: true });
  let text = '';
  try {
    for await (const ev of stream) {
      if (ev.type === 'response.output_text.delta') text += ev.delta;
    }
    assert.fail(`the stream ended cleanly after ${JSON.stringify(text)}; want an error`);
  } catch (err) {
    assert.ok(err instanceof OpenAI.APIError, `want APIError, got ${err?.constructor?.name}: ${err}`);
  }
  assert.ok(text.length > 0, 'some text arrived before the cut');
  assert.equal(calls.length, 1);
});

test("responses, streaming: a provider's error event after output started is an APIError", async () => {
  const { c, calls } = client();
  const stream = await c.responses.create({ model: MODEL, input: 'node-test: stream error', stream: true });
  let text = '';
  try {
    for await (const ev of stream) {
      if (ev.type === 'response.output_text.delta') text += ev.delta;
    }
    assert.fail(`the stream ended cleanly after ${JSON.stringify(text)}; want an error`);
  } catch (err) {
    assert.ok(err instanceof OpenAI.APIError, `want APIError, got ${err?.constructor?.name}: ${err}`);
    assert.match(err.message, /The server had an error while processing your request/);
  }
  assert.ok(text.length > 0, 'some text arrived before the error');
  assert.equal(calls.length, 1);
});

// Last: it leaves failures on both deployments' breakers.
test('persistent server errors: belay retries and falls back, then a 5xx the SDK does not retry', async () => {
  const { c, calls } = client();
  const err = await expectAPIError(
    c.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'node-test: always server error' }] }),
  );
  assert.ok(err.status >= 500 && err.status < 600, `status ${err.status}`);
  assert.equal(err.headers.get('x-should-retry'), 'false');
  const attempts = Number(err.headers.get('x-belay-attempts'));
  assert.ok(attempts >= 2, `x-belay-attempts ${attempts}: belay should have retried or fallen back`);
  assert.equal(calls.length, 1, `the SDK retried: ${JSON.stringify(calls)}`);
});
