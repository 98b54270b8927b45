import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeSelfSignedCert } from '@triad/testing';

// HTTPS servers standing in for the OpenAI and Anthropic APIs, answering in the shapes their public API
// references document (Chat Completions, Completions, Responses; Messages with its named stream events). A
// throw-away self-signed certificate is made per run with openssl, so providers point at them with
// `insecureSkipVerify: true` (or fail TLS verification without it).
//
// Behaviour switches by the model the stand-in is asked for: `*-401` refuses the key and echoes it back (as
// some providers do), `*-flaky` answers 503 to the first `flakyFailures` requests, `*-slow` holds its headers
// for `slowMs`; Anthropic streams of `*-cut` end cleanly before `message_stop`, of `*-reset` lose the connection
// there.

export interface ReceivedCall {
  readonly path: string;
  readonly headers: IncomingMessage['headers'];
  readonly body: Record<string, unknown>;
}

export interface StandIn {
  readonly url: string;
  readonly calls: ReceivedCall[];
  flakyFailures: number;
  slowMs: number;
  close(): Promise<void>;
}

function makeCert(): { cert: Buffer; key: Buffer } {
  const dir = mkdtempSync(join(tmpdir(), 'triad-provider-tls-'));
  try {
    const files = writeSelfSignedCert(dir, 'provider');
    return { cert: readFileSync(files.cert), key: readFileSync(files.key) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function readBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>);
      } catch {
        resolve({});
      }
    });
  });
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

const sse = (data: unknown, event?: string) =>
  `${event ? `event: ${event}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;

async function startStandIn(
  handle: (call: ReceivedCall, res: ServerResponse, s: StandIn) => void,
  authorized: (headers: IncomingMessage['headers']) => string | undefined,
  refuse: (res: ServerResponse, sentKey: string) => void,
): Promise<StandIn> {
  const tls = makeCert();
  const calls: ReceivedCall[] = [];
  let state: StandIn;
  let flakyServed = 0;
  const server: Server = createServer(tls, (req, res) => {
    void readBody(req).then(async (body) => {
      const call = { path: req.url ?? '', headers: req.headers, body };
      calls.push(call);
      const model = String(body['model'] ?? '');
      const key = authorized(req.headers);
      if (model.endsWith('-401') || key === undefined) {
        refuse(res, key ?? '');
        return;
      }
      if (model.endsWith('-flaky') && flakyServed < state.flakyFailures) {
        flakyServed++;
        json(res, 503, { error: { message: 'overloaded, try again', type: 'server_error' } });
        return;
      }
      if (model.endsWith('-slow')) await new Promise((r) => setTimeout(r, state.slowMs));
      handle(call, res, state);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  state = {
    url: `https://127.0.0.1:${port}`,
    calls,
    flakyFailures: 0,
    slowMs: 0,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return state;
}

/** The OpenAI API: `Authorization: Bearer <key>`; chat/completions, completions and responses, streamed or not. */
export function startOpenAiStandIn(apiKey: string): Promise<StandIn> {
  return startStandIn(
    (call, res) => {
      const model = String(call.body['model']);
      const stream = call.body['stream'] === true;
      const created = 1_760_000_000;
      if (call.path === '/v1/chat/completions') {
        const usage = { prompt_tokens: 11, completion_tokens: 5, total_tokens: 16 };
        if (!stream) {
          json(res, 200, {
            id: 'chatcmpl-standin',
            object: 'chat.completion',
            created,
            model,
            choices: [{ index: 0, message: { role: 'assistant', content: 'Hello from OpenAI' }, logprobs: null, finish_reason: 'stop' }],
            usage,
          });
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
        const chunk = (delta: unknown, finish: string | null) =>
          sse({
            id: 'chatcmpl-standin',
            object: 'chat.completion.chunk',
            created,
            model,
            choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
          });
        res.write(chunk({ role: 'assistant', content: '' }, null));
        for (const piece of ['Hello', ' from', ' OpenAI']) res.write(chunk({ content: piece }, null));
        res.write(chunk({}, 'stop'));
        const options = call.body['stream_options'] as { include_usage?: boolean } | undefined;
        if (options?.include_usage === true) {
          res.write(sse({ id: 'chatcmpl-standin', object: 'chat.completion.chunk', created, model, choices: [], usage }));
        }
        res.end(sse('[DONE]'));
        return;
      }
      if (call.path === '/v1/completions') {
        json(res, 200, {
          id: 'cmpl-standin',
          object: 'text_completion',
          created,
          model,
          choices: [{ index: 0, text: ' a completion', logprobs: null, finish_reason: 'stop' }],
          usage: { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 },
        });
        return;
      }
      if (call.path === '/v1/responses') {
        const output = [
          {
            type: 'message',
            id: 'msg_r',
            status: 'completed',
            role: 'assistant',
            content: [{ type: 'output_text', text: 'Responses!', annotations: [] }],
          },
        ];
        const response = (status: string, extra: Record<string, unknown>) => ({
          id: 'resp_standin',
          object: 'response',
          created_at: created,
          status,
          model,
          ...extra,
        });
        const usage = { input_tokens: 9, output_tokens: 4, total_tokens: 13 };
        if (!stream) {
          json(res, 200, response('completed', { output, usage }));
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(
          sse(
            { type: 'response.created', sequence_number: 0, response: response('in_progress', { output: [], usage: null }) },
            'response.created',
          ),
        );
        res.write(
          sse(
            {
              type: 'response.output_text.delta',
              sequence_number: 1,
              item_id: 'msg_r',
              output_index: 0,
              content_index: 0,
              delta: 'Responses!',
            },
            'response.output_text.delta',
          ),
        );
        res.end(
          sse({ type: 'response.completed', sequence_number: 2, response: response('completed', { output, usage }) }, 'response.completed'),
        );
        return;
      }
      json(res, 404, { error: { message: `Invalid URL (POST ${call.path})`, type: 'invalid_request_error', param: null, code: null } });
    },
    (headers) => (headers['authorization'] === `Bearer ${apiKey}` ? apiKey : undefined),
    (res, sent) =>
      json(res, 401, {
        error: {
          message: `Incorrect API key provided: ${sent || '(none)'}.`,
          type: 'invalid_request_error',
          param: null,
          code: 'invalid_api_key',
        },
      }),
  );
}

/** The Anthropic Messages API: `x-api-key` and `anthropic-version`; text and tool_use answers, streamed or not. */
export function startAnthropicStandIn(apiKey: string): Promise<StandIn> {
  return startStandIn(
    (call, res) => {
      if (call.path !== '/v1/messages') {
        json(res, 404, { type: 'error', error: { type: 'not_found_error', message: 'Not found' } });
        return;
      }
      if (typeof call.headers['anthropic-version'] !== 'string') {
        json(res, 400, { type: 'error', error: { type: 'invalid_request_error', message: 'anthropic-version header is required' } });
        return;
      }
      if (typeof call.body['max_tokens'] !== 'number') {
        json(res, 400, { type: 'error', error: { type: 'invalid_request_error', message: 'max_tokens: Field required' } });
        return;
      }
      const model = String(call.body['model']);
      const tools = call.body['tools'] as { name: string }[] | undefined;
      const tool = tools?.[0];
      const id = 'msg_standin';
      if (call.body['stream'] !== true) {
        const content: unknown[] = [{ type: 'text', text: tool ? 'Checking.' : 'Hello from Claude' }];
        if (tool) content.push({ type: 'tool_use', id: 'toolu_standin', name: tool.name, input: { city: 'Paris' } });
        json(res, 200, {
          id,
          type: 'message',
          role: 'assistant',
          model,
          content,
          stop_reason: tool ? 'tool_use' : 'end_turn',
          stop_sequence: null,
          usage: { input_tokens: 12, cache_creation_input_tokens: 0, cache_read_input_tokens: 2, output_tokens: 6 },
        });
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
      res.write(
        sse(
          {
            type: 'message_start',
            message: {
              id,
              type: 'message',
              role: 'assistant',
              model,
              content: [],
              stop_reason: null,
              stop_sequence: null,
              usage: { input_tokens: 12, cache_creation_input_tokens: 0, cache_read_input_tokens: 2, output_tokens: 1 },
            },
          },
          'message_start',
        ),
      );
      res.write(sse({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }, 'content_block_start'));
      res.write(sse({ type: 'ping' }, 'ping'));
      for (const text of tool ? ['Checking.'] : ['Hello', ' from Claude']) {
        res.write(sse({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } }, 'content_block_delta'));
      }
      if (model.endsWith('-cut')) {
        res.end();
        return;
      }
      if (model.endsWith('-reset')) {
        // Once what was written has left, the connection goes without the rest of the stream.
        res.write(sse({ type: 'ping' }, 'ping'), () => res.destroy());
        return;
      }
      res.write(sse({ type: 'content_block_stop', index: 0 }, 'content_block_stop'));
      if (tool) {
        res.write(
          sse(
            {
              type: 'content_block_start',
              index: 1,
              content_block: { type: 'tool_use', id: 'toolu_standin', name: tool.name, input: {} },
            },
            'content_block_start',
          ),
        );
        for (const partial of ['{"city": ', '"Paris"}']) {
          res.write(
            sse(
              { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: partial } },
              'content_block_delta',
            ),
          );
        }
        res.write(sse({ type: 'content_block_stop', index: 1 }, 'content_block_stop'));
      }
      res.write(
        sse(
          {
            type: 'message_delta',
            delta: { stop_reason: tool ? 'tool_use' : 'end_turn', stop_sequence: null },
            usage: { output_tokens: 6 },
          },
          'message_delta',
        ),
      );
      res.end(sse({ type: 'message_stop' }, 'message_stop'));
    },
    (headers) => (headers['x-api-key'] === apiKey ? apiKey : undefined),
    (res, sent) => json(res, 401, { type: 'error', error: { type: 'authentication_error', message: `invalid x-api-key ${sent}` } }),
  );
}
