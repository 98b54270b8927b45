import type { OutgoingHttpHeaders } from 'node:http';
import {
  runGeneration,
  type GenerationControl,
  type GenerationEnv,
  type GenerationOutcome,
  type GenerationSpec,
  type TokenSink,
} from '../engine/generation';
import type { Exchange } from '../http/router';
import { sendJson, startEventStream } from '../http/respond';
import type { BodyExtras, ResponseFormat, ResponseView } from './format';

/** Tokens written per event-loop turn when streaming in the zero profile: one SSE event each, few syscalls. */
export const ZERO_PROFILE_STREAM_BATCH = 16;

export interface ServeGenerationArgs {
  readonly ex: Exchange;
  readonly env: GenerationEnv;
  readonly spec: GenerationSpec;
  readonly view: ResponseView;
  readonly format: ResponseFormat;
  readonly stream: boolean;
  readonly headers: OutgoingHttpHeaders;
  /** Runs after the last token and before the body is written (hold KV blocks, save the EC entry, ...). */
  readonly finish?: (outcome: GenerationOutcome) => BodyExtras | Promise<BodyExtras>;
}

/**
 * Runs a generation and writes it as one JSON body or as SSE events, honouring client aborts, socket
 * backpressure and the `die-mid-stream` fault (the connection is destroyed after `afterTokens` output tokens, by
 * default halfway through the output).
 */
export async function serveGeneration(args: ServeGenerationArgs): Promise<GenerationOutcome> {
  const { ex, view, stream } = args;
  const { res } = ex;
  // The client may already be gone (it left while a KV pull or bootstrap wait was in progress).
  const ctl: GenerationControl = { aborted: res.destroyed || ex.req.socket.destroyed };
  res.once('close', () => {
    if (!res.writableFinished) {
      ctl.aborted = true;
      ctl.cancelQueue?.();
    }
  });
  const dieAt = ex.fault?.mode === 'die-mid-stream' ? dieAfter(ex.fault.afterTokens, view.plan.count) : undefined;
  if (stream && !res.headersSent) startEventStream(res, args.headers);
  const sink = stream ? streamSink(args, ctl, dieAt) : BODY_SINK;
  const outcome = await runGeneration(args.spec, sink, ctl, args.env);
  if (ctl.aborted || res.destroyed) {
    if (dieAt === undefined) args.env.onAbort?.();
    return outcome;
  }
  const extras = args.finish ? await args.finish(outcome) : {};
  if (stream) {
    res.end(args.format.framer(view).close());
    return outcome;
  }
  const body = args.format.body(view, extras);
  if (dieAt !== undefined) {
    // Promise the whole body, send half of it, then drop the connection.
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...args.headers });
    res.write(body.slice(0, Math.floor(body.length / 2)), () => res.destroy());
    return outcome;
  }
  sendJson(res, 200, body, args.headers);
  return outcome;
}

/** Output tokens written before a `die-mid-stream` fault drops the connection (never more than the answer has). */
function dieAfter(afterTokens: number | undefined, count: number): number {
  return afterTokens === undefined ? Math.max(1, Math.floor(count / 2)) : Math.min(afterTokens, count);
}

const BODY_SINK: TokenSink = {
  batch: Number.MAX_SAFE_INTEGER,
  first() {},
  write: () => true,
  drained: () => Promise.resolve(),
};

function streamSink(args: ServeGenerationArgs, ctl: GenerationControl, dieAt: number | undefined): TokenSink {
  const { res } = args.ex;
  const framer = args.format.framer(args.view);
  let opening = '';
  let written = 0;
  return {
    batch: ZERO_PROFILE_STREAM_BATCH,
    first() {
      // Sent together with the first tokens: one write instead of two.
      opening = framer.open();
    },
    write(from, to) {
      if (res.destroyed) return true;
      const cut = dieAt !== undefined && to >= dieAt ? dieAt : to;
      const text = opening + framer.tokens(from, cut);
      opening = '';
      written = cut;
      if (cut !== to || (dieAt !== undefined && cut === dieAt)) {
        ctl.aborted = true;
        res.write(text, () => res.destroy());
        return true;
      }
      return res.write(text);
    },
    drained: () => args.env.stalls.drained(res, written),
  };
}
