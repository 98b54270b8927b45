import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import {
  Buckets,
  ExternalProviderRecordSchema,
  ProviderCredentialRecordSchema,
  objectKey,
  sealCredential,
  type ExternalProviderRecord,
} from '@triad/bus';
import type { ExternalModelProviderSpec, ModelRouteSpec } from '@triad/crd';
import { waitFor } from '@triad/testing';
import { accessLines, NS, startHarness, type Harness } from './support/harness';
import { startAnthropicStandIn, startOpenAiStandIn, type StandIn } from './support/provider-standins';
import { startMemoryTracing, type MemoryTracing } from './support/memory-tracing';

// Issue 19: ModelRoute targets naming an ExternalModelProvider are served by the gateway, against HTTPS servers
// standing in for the OpenAI and Anthropic APIs; provider records and sealed credentials are written to KV as
// the pod-watcher writes them.

const OPENAI_KEY = `sk-standin-${randomBytes(12).toString('hex')}`;
const ANTHROPIC_KEY = `sk-ant-standin-${randomBytes(12).toString('hex')}`;
const CLIENT_KEY = 'sk-client-own-key';

type Json = Record<string, unknown>;

describe('gateway: ExternalModelProvider targets', () => {
  let h: Harness;
  let openai: StandIn;
  let anthropic: StandIn;
  let tracing: MemoryTracing;
  const dir = mkdtempSync(join(tmpdir(), 'triad-gw-providers-'));
  const credentialsKey = randomBytes(32);

  async function putProvider(
    name: string,
    spec: Partial<ExternalModelProviderSpec> & { baseURL: string },
    secret?: string,
    extra?: Partial<ExternalProviderRecord>,
  ) {
    const providers = await h.bus.kv(Buckets.externalProviders, ExternalProviderRecordSchema);
    const credentials = await h.bus.kv(Buckets.providerCredentials, ProviderCredentialRecordSchema);
    const providerType = spec.providerType ?? 'OpenAI';
    const scheme = providerType === 'Anthropic' ? ('APIKey' as const) : ('Bearer' as const);
    const header = scheme === 'Bearer' ? ('authorization' as const) : ('x-api-key' as const);
    const key = objectKey(NS, name);
    await providers.put(key, {
      schemaVersion: 1,
      namespace: NS,
      name,
      spec: { providerType, insecureSkipVerify: false, ...spec },
      ...(secret !== undefined ? { auth: { scheme, header } } : {}),
      ready: true,
      reason: 'Ready',
      message: 'provider is ready',
      ...extra,
    });
    if (secret !== undefined) {
      await credentials.put(key, {
        schemaVersion: 1,
        namespace: NS,
        provider: name,
        scheme,
        header,
        sealed: sealCredential(secret, credentialsKey, key),
      });
    }
  }

  const routeTo = (provider: string, extra: Partial<ModelRouteSpec> = {}): ModelRouteSpec => ({
    rules: [{ targetModels: [{ externalModelProviderName: provider, weight: 100 }] }],
    ...extra,
  });

  async function post(path: string, body: Json, headers: Record<string, string> = {}) {
    const res = await fetch(`${h.gateway.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}`, ...headers },
      body: JSON.stringify(body),
    });
    return { status: res.status, headers: res.headers, text: await res.text() };
  }

  const lastCall = (s: StandIn) => s.calls[s.calls.length - 1];
  const client = () => new OpenAI({ baseURL: `${h.gateway.url}/v1`, apiKey: CLIENT_KEY, maxRetries: 0 });

  beforeAll(async () => {
    tracing = startMemoryTracing();
    const keyFile = join(dir, 'credentials.key');
    writeFileSync(keyFile, credentialsKey.toString('base64'));
    [openai, anthropic] = await Promise.all([startOpenAiStandIn(OPENAI_KEY), startAnthropicStandIn(ANTHROPIC_KEY)]);
    h = await startHarness({
      config: { credentialsKeyFile: keyFile, firstByteTimeoutMs: 400, providerRetries: 2, providerRetryIntervalMs: 10 },
      tracing: true,
    });
    await putProvider(
      'openai',
      {
        baseURL: `${openai.url}/v1`,
        model: 'gpt-standin',
        insecureSkipVerify: true,
        headers: { 'OpenAI-Organization': 'org-triad' },
      },
      OPENAI_KEY,
    );
    await putProvider('openai-passthrough-model', { baseURL: openai.url, insecureSkipVerify: true }, OPENAI_KEY);
    await putProvider('claude', { providerType: 'Anthropic', baseURL: anthropic.url, insecureSkipVerify: true }, ANTHROPIC_KEY);
    await putProvider('verified', { baseURL: openai.url, model: 'gpt-standin' }, OPENAI_KEY);
    await putProvider('not-ready', { baseURL: openai.url, insecureSkipVerify: true }, undefined, {
      ready: false,
      reason: 'CredentialNotFound',
      message: 'Secret default/missing is not found',
    });
    await putProvider('no-credential', { baseURL: openai.url, insecureSkipVerify: true }, undefined, {
      auth: { scheme: 'Bearer', header: 'authorization' },
    });
    await h.putRoute('gpt', { modelName: 'gpt', ...routeTo('openai') });
    await h.putRoute('gpt-raw', { modelName: 'gpt-raw', ...routeTo('openai-passthrough-model') });
    await h.putRoute('claude', { modelName: 'claude', ...routeTo('claude') });
    for (const m of ['claude-cut', 'claude-reset']) await h.putRoute(m, { modelName: m, ...routeTo('claude') });
    await h.putRoute('verified', { modelName: 'verified', ...routeTo('verified') });
    await h.putRoute('not-ready', { modelName: 'not-ready', ...routeTo('not-ready') });
    await h.putRoute('no-credential', { modelName: 'no-credential', ...routeTo('no-credential') });
    await h.putRoute('missing', { modelName: 'missing', ...routeTo('no-such-provider') });
    await h.putRoute('limited', { modelName: 'limited', ...routeTo('openai'), rateLimit: { outputTokensPerUnit: 10, unit: 'month' } });
    for (const m of ['gpt-echo-401', 'gpt-flaky', 'gpt-slow'])
      await h.putRoute(m, { modelName: m, ...routeTo('openai-passthrough-model') });
    await h.waitForModel('gpt-slow');
  });

  afterAll(async () => {
    await h?.close();
    await Promise.all([openai?.close(), anthropic?.close()]);
    await tracing?.telemetry.shutdown();
    rmSync(dir, { recursive: true, force: true });
  });

  describe('OpenAI providers', () => {
    it('serves chat completions through the OpenAI SDK: provider model, credential, static headers, no client credential', async () => {
      const res = await client().chat.completions.create({ model: 'gpt', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 });
      expect(res.choices[0]?.message.content).toBe('Hello from OpenAI');
      expect(res.usage).toEqual({ prompt_tokens: 11, completion_tokens: 5, total_tokens: 16 });
      const call = lastCall(openai);
      // baseURL `.../v1` + `/v1/chat/completions`: the version is not doubled.
      expect(call.path).toBe('/v1/chat/completions');
      expect(call.body).toMatchObject({ model: 'gpt-standin', max_tokens: 8 });
      expect(call.headers['authorization']).toBe(`Bearer ${OPENAI_KEY}`);
      expect(call.headers['openai-organization']).toBe('org-triad');
      expect(JSON.stringify(call.headers)).not.toContain(CLIENT_KEY);
      await waitFor(() => accessLines(h).some((l) => l['model_name'] === 'gpt' && l['output_tokens'] === 5), {
        what: 'access log with usage',
      });
      const line = accessLines(h).find((l) => l['model_name'] === 'gpt');
      expect(line).toMatchObject({
        status_code: 200,
        model_server: `${NS}/openai`,
        upstream_model: 'gpt-standin',
        input_tokens: 11,
        endpoints: { aggregated: ['openai'] },
      });
    });

    it('streams chat, asking for usage and removing the usage chunk the client did not ask for', async () => {
      const stream = await client().chat.completions.create({
        model: 'gpt',
        messages: [{ role: 'user', content: 'stream' }],
        stream: true,
      });
      let text = '';
      const chunks = [];
      for await (const chunk of stream) {
        chunks.push(chunk);
        text += chunk.choices[0]?.delta.content ?? '';
      }
      expect(text).toBe('Hello from OpenAI');
      expect(chunks.some((c) => c.usage)).toBe(false);
      expect(lastCall(openai).body['stream_options']).toEqual({ include_usage: true });

      const withUsage = await client().chat.completions.create({
        model: 'gpt',
        messages: [{ role: 'user', content: 'stream' }],
        stream: true,
        stream_options: { include_usage: true },
      });
      const all = [];
      for await (const chunk of withUsage) all.push(chunk);
      expect(all[all.length - 1]?.usage?.completion_tokens).toBe(5);
    });

    it('passes completions and responses (streamed or not) through, counting Responses API usage', async () => {
      const completion = await client().completions.create({ model: 'gpt-raw', prompt: 'Say', max_tokens: 3 });
      expect(completion.choices[0]?.text).toBe(' a completion');
      expect(lastCall(openai)).toMatchObject({ path: '/v1/completions', body: { model: 'gpt-raw' } });

      const response = await client().responses.create({ model: 'gpt-raw', input: 'Tell me' });
      expect(response.output_text).toBe('Responses!');
      const events: string[] = [];
      const stream = await client().responses.create({ model: 'gpt-raw', input: 'Tell me', stream: true });
      for await (const event of stream) events.push(event.type);
      expect(events).toEqual(['response.created', 'response.output_text.delta', 'response.completed']);
      // No stream_options on the Responses API: the body goes as the client sent it (model aside).
      expect(lastCall(openai).body).toEqual({ model: 'gpt-raw', input: 'Tell me', stream: true });
      await waitFor(
        () =>
          accessLines(h).filter((l) => l['path'] === '/v1/responses' && l['output_tokens'] === 4 && l['input_tokens'] === 9).length === 2,
        { what: 'Responses usage in the access log' },
      );
    });

    it('refuses paths the provider type does not serve with 400', async () => {
      const res = await post('/v1/embeddings', { model: 'gpt', input: 'x' });
      expect(res.status).toBe(400);
      expect(JSON.parse(res.text).error).toMatchObject({
        type: 'invalid_request_error',
        message: expect.stringContaining('/v1/embeddings'),
      });
    });
  });

  describe('Anthropic providers', () => {
    it('passes /v1/messages through with x-api-key and a default anthropic-version, counting cached input', async () => {
      const res = await post('/v1/messages', { model: 'claude', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });
      expect(res.status).toBe(200);
      expect(JSON.parse(res.text)).toMatchObject({ type: 'message', content: [{ type: 'text', text: 'Hello from Claude' }] });
      const call = lastCall(anthropic);
      expect(call.headers['x-api-key']).toBe(ANTHROPIC_KEY);
      expect(call.headers['anthropic-version']).toBe('2023-06-01');
      expect(call.headers['authorization']).toBeUndefined();
      await waitFor(
        () => accessLines(h).some((l) => l['path'] === '/v1/messages' && l['input_tokens'] === 14 && l['output_tokens'] === 6),
        {
          what: 'Anthropic usage',
        },
      );
    });

    it('relays the Messages event stream byte for byte (event names kept), with the client anthropic-version', async () => {
      const res = await post(
        '/v1/messages',
        { model: 'claude', max_tokens: 16, stream: true, messages: [{ role: 'user', content: 'hi' }] },
        { 'anthropic-version': '2024-01-01' },
      );
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/event-stream');
      const names = [...res.text.matchAll(/^event: (.+)$/gm)].map((m) => m[1]);
      expect(names).toEqual([
        'message_start',
        'content_block_start',
        'ping',
        'content_block_delta',
        'content_block_delta',
        'content_block_stop',
        'message_delta',
        'message_stop',
      ]);
      expect(lastCall(anthropic).headers['anthropic-version']).toBe('2024-01-01');
    });

    it('translates an OpenAI chat request and answer: system, default max_tokens, finish reason, usage', async () => {
      const res = await client().chat.completions.create({
        model: 'claude',
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'hi' },
        ],
        stop: 'END',
        temperature: 0.2,
      });
      expect(res).toMatchObject({
        object: 'chat.completion',
        choices: [{ index: 0, message: { role: 'assistant', content: 'Hello from Claude' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 14, completion_tokens: 6, total_tokens: 20 },
      });
      const call = lastCall(anthropic);
      expect(call.path).toBe('/v1/messages');
      expect(call.body).toEqual({
        model: 'claude',
        system: 'Be brief.',
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 4096,
        temperature: 0.2,
        stop_sequences: ['END'],
      });
    });

    it('translates tools both ways: function tools in, tool_use out as tool_calls', async () => {
      const tools = [
        {
          type: 'function' as const,
          function: {
            name: 'weather',
            description: 'Weather by city',
            parameters: { type: 'object', properties: { city: { type: 'string' } } },
          },
        },
      ];
      const res = await client().chat.completions.create({
        model: 'claude',
        messages: [{ role: 'user', content: 'Paris?' }],
        tools,
        tool_choice: 'required',
      });
      expect(res.choices[0]).toMatchObject({
        finish_reason: 'tool_calls',
        message: {
          content: 'Checking.',
          tool_calls: [{ id: 'toolu_standin', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }],
        },
      });
      expect(lastCall(anthropic).body).toMatchObject({
        tools: [{ name: 'weather', description: 'Weather by city', input_schema: { type: 'object' } }],
        tool_choice: { type: 'any' },
      });

      // The tool result goes back as a tool_result block.
      await client().chat.completions.create({
        model: 'claude',
        tools,
        messages: [
          { role: 'user', content: 'Paris?' },
          {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: 'toolu_standin', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }],
          },
          { role: 'tool', tool_call_id: 'toolu_standin', content: 'sunny' },
        ],
      });
      expect(lastCall(anthropic).body['messages']).toEqual([
        { role: 'user', content: 'Paris?' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_standin', name: 'weather', input: { city: 'Paris' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_standin', content: 'sunny' }] },
      ]);
    });

    it('translates the Messages stream into chat.completion.chunk events, tool call deltas and the usage chunk included', async () => {
      const stream = await client().chat.completions.create({
        model: 'claude',
        messages: [{ role: 'user', content: 'hi' }],
        stream: true,
        stream_options: { include_usage: true },
      });
      const chunks = [];
      for await (const chunk of stream) chunks.push(chunk);
      expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('Hello from Claude');
      expect(chunks[0]?.choices[0]?.delta.role).toBe('assistant');
      expect(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0]?.finish_reason).toBe('stop');
      expect(chunks[chunks.length - 1]).toMatchObject({ choices: [], usage: { prompt_tokens: 14, completion_tokens: 6 } });
      expect(lastCall(anthropic).body).toMatchObject({ stream: true });

      const tools = [{ type: 'function' as const, function: { name: 'weather', parameters: { type: 'object' } } }];
      const toolStream = await client().chat.completions.create({
        model: 'claude',
        messages: [{ role: 'user', content: 'Paris?' }],
        tools,
        stream: true,
      });
      let args = '';
      let name = '';
      let finish: string | null | undefined;
      const seen = [];
      for await (const chunk of toolStream) {
        seen.push(chunk);
        const call = chunk.choices[0]?.delta.tool_calls?.[0];
        if (call?.function?.name) name = call.function.name;
        args += call?.function?.arguments ?? '';
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      expect({ name, args: JSON.parse(args), finish }).toEqual({ name: 'weather', args: { city: 'Paris' }, finish: 'tool_calls' });
      expect(seen.some((c) => c.usage)).toBe(false);
    });
  });

  describe('failures, retries, timeouts and limits', () => {
    it('retries a 503 before any byte and answers from the next try', async () => {
      openai.flakyFailures = 2;
      const before = openai.calls.length;
      const res = await post('/v1/chat/completions', { model: 'gpt-flaky', messages: [{ role: 'user', content: 'x' }] });
      expect(res.status).toBe(200);
      expect(openai.calls.length - before).toBe(3);
    });

    it('passes a 503 through once the retries are spent', async () => {
      openai.flakyFailures = 10;
      const res = await post('/v1/chat/completions', { model: 'gpt-flaky', messages: [{ role: 'user', content: 'x' }] });
      expect(res.status).toBe(503);
      expect(JSON.parse(res.text)).toEqual({ error: { message: 'overloaded, try again', type: 'server_error' } });
      openai.flakyFailures = 0;
    });

    it('ends a Messages stream the provider broke off with an Anthropic error event, after what was relayed, without a retry', async () => {
      const before = anthropic.calls.length;
      const res = await post('/v1/messages', {
        model: 'claude-reset',
        max_tokens: 32,
        stream: true,
        messages: [{ role: 'user', content: 'x' }],
      });
      expect(res.status).toBe(200);
      expect(anthropic.calls.length - before).toBe(1);
      expect(res.text).toContain('"text":" from Claude"');
      const last = res.text.trimEnd().split('\n\n').at(-1)!;
      expect(last.startsWith('event: error\ndata: ')).toBe(true);
      expect(JSON.parse(last.slice('event: error\ndata: '.length))).toMatchObject({ type: 'error', error: { type: 'api_error' } });
    });

    it('ends a translated chat stream that stopped before message_stop with an OpenAI error event and [DONE]', async () => {
      const res = await post('/v1/chat/completions', { model: 'claude-cut', stream: true, messages: [{ role: 'user', content: 'x' }] });
      expect(res.status).toBe(200);
      const events = res.text.trimEnd().split('\n\n');
      expect(events.some((e) => e.includes('"content":"Hello"'))).toBe(true);
      expect(events.at(-1)).toBe('data: [DONE]');
      const error = JSON.parse(events.at(-2)!.slice('data: '.length)) as { error: { code: string; message: string } };
      expect(error.error.code).toBe('GATEWAY_UPSTREAM_ERROR');
      expect(error.error.message).toContain('before message_stop');
    });

    it('answers 504 when the provider does not answer within the first-byte timeout', async () => {
      openai.slowMs = 2_000;
      const res = await post('/v1/chat/completions', { model: 'gpt-slow', messages: [{ role: 'user', content: 'x' }] });
      expect(res.status).toBe(504);
      expect(JSON.parse(res.text).error).toMatchObject({ type: 'timeout_error', code: 'GATEWAY_UPSTREAM_TIMEOUT' });
      openai.slowMs = 0;
    });

    it('verifies the provider certificate unless insecureSkipVerify is set (502)', async () => {
      const res = await post('/v1/chat/completions', { model: 'verified', messages: [{ role: 'user', content: 'x' }] });
      expect(res.status).toBe(502);
      expect(JSON.parse(res.text).error.code).toBe('GATEWAY_UPSTREAM_ERROR');
    });

    it('answers 404 for a missing provider and 503 for one that is not ready or whose credential is unavailable', async () => {
      expect((await post('/v1/chat/completions', { model: 'missing', messages: [{ role: 'user', content: 'x' }] })).status).toBe(404);
      const notReady = await post('/v1/chat/completions', { model: 'not-ready', messages: [{ role: 'user', content: 'x' }] });
      expect(notReady.status).toBe(503);
      expect(JSON.parse(notReady.text).error).toMatchObject({
        code: 'GATEWAY_PROVIDER_UNAVAILABLE',
        message: expect.stringContaining('CredentialNotFound'),
      });
      const noCredential = await post('/v1/chat/completions', { model: 'no-credential', messages: [{ role: 'user', content: 'x' }] });
      expect(noCredential.status).toBe(503);
    });

    it('applies the route rate limit to provider targets with the usage the provider reported', async () => {
      const chat = { model: 'limited', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] };
      expect((await post('/v1/chat/completions', chat)).status).toBe(200);
      expect((await post('/v1/chat/completions', chat)).status).toBe(200);
      const refused = await post('/v1/chat/completions', chat);
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
    });
  });

  describe('tracing and secrecy', () => {
    it('traces each provider call as a client span with the provider as server and GenAI provider name', async () => {
      const res = await post('/v1/chat/completions', { model: 'claude', messages: [{ role: 'user', content: 'traced' }] });
      expect(res.status).toBe(200);
      const traceId = res.headers.get('x-triad-trace-id');
      const legOf = () => tracing.exporter.getFinishedSpans().find((s) => s.name === 'aggregated' && s.spanContext().traceId === traceId);
      await waitFor(() => legOf() !== undefined, { what: 'the provider call span' });
      const span = legOf()!;
      expect(span.attributes).toMatchObject({
        'server.address': '127.0.0.1',
        'gen_ai.provider.name': 'anthropic',
        'gen_ai.request.model': 'claude',
      });
      expect(lastCall(anthropic).headers['traceparent']).toContain(span.spanContext().spanId);
    });

    it('never lets a credential reach an error body, a log line or a span', async () => {
      const res = await post('/v1/chat/completions', { model: 'gpt-echo-401', messages: [{ role: 'user', content: 'x' }] });
      expect(res.status).toBe(401);
      // The stand-in echoed the key it got: the gateway scrubbed it.
      expect(res.text).toContain('[redacted]');
      expect(res.text).not.toContain(OPENAI_KEY);
      await waitFor(() => accessLines(h).some((l) => l['model_name'] === 'gpt-echo-401'), { what: 'the access log line' });
      await new Promise((r) => setImmediate(r));
      const logs = JSON.stringify(h.logLines);
      const spans = JSON.stringify(
        tracing.exporter.getFinishedSpans().map((s) => ({ attributes: s.attributes, events: s.events, status: s.status })),
      );
      for (const secret of [OPENAI_KEY, ANTHROPIC_KEY]) {
        expect(logs).not.toContain(secret);
        expect(spans).not.toContain(secret);
      }
    });
  });
});
