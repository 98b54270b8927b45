import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { readBody } from '../http/body';
import { sendJson, sendText } from '../http/respond';
import { canonicalRoom } from '../sglang/bootstrap-fields';
import { HandoffRegistry } from './handoff-registry';
import { listen } from '../http/listen';

/** Long-poll paths a simulated decode uses to wait for its prefill (SGLang rooms, vLLM Mooncake transfer ids). */
export const ROOM_WAIT_PATH = '/sim/rooms/';
export const TRANSFER_WAIT_PATH = '/sim/transfers/';
/** SGLang: a decode asks which prefill DP rank holds a room (when it cannot derive it from the room). */
export const ROOM_RANK_WAIT_PATH = '/sim/room-ranks/';
const MAX_WAIT_MS = 600_000;

export interface BootstrapServerOptions {
  readonly host: string;
  /** 0 picks a free port. */
  readonly port: number;
  readonly dpSize: number;
  /** vLLM Mooncake `/query`: the engine id of each DP rank. */
  readonly engineIds: readonly string[];
  /** vLLM Mooncake `/query`: the worker address each rank registered (`tcp://host:port`; upstream its ZMQ sender). */
  readonly workerAddr?: () => string;
  /** SGLang: the prefill's resolved `--load-balance-method`, reported by `GET /route` so a decode can derive ranks. */
  readonly loadBalanceMethod?: string;
  readonly leaseMs?: number;
  /** Called when a decode takes a hand-off (`room:<n>` or `xfer:<id>`). */
  readonly onHandoff?: (key: string) => void;
}

/**
 * The bootstrap HTTP server a prefill runs next to its API (SGLang `--disaggregation-bootstrap-port`, vLLM Mooncake
 * bootstrap; both default to 8998): `GET /health` answers "OK", `PUT/GET /route` register and describe the prefill
 * ranks (SGLang), `GET /query` lists engine ids per DP rank (vLLM Mooncake), and the simulator adds long polls where
 * a decode waits until the prefill has computed its room or transfer.
 */
export class BootstrapServer {
  readonly handoffs: HandoffRegistry;
  readonly #server: Server;
  readonly #opts: BootstrapServerOptions;
  #routes: unknown[] = [];
  #port = 0;

  private constructor(opts: BootstrapServerOptions) {
    this.#opts = opts;
    this.handoffs = new HandoffRegistry(opts.leaseMs ?? 60_000);
    this.#server = createServer((req, res) => {
      this.#handle(req, res).catch(() => sendText(res, 500, 'internal error'));
    });
    this.#server.keepAliveTimeout = 5_000;
  }

  static async start(opts: BootstrapServerOptions): Promise<BootstrapServer> {
    const server = new BootstrapServer(opts);
    server.#port = await listen(server.#server, opts.host, opts.port);
    return server;
  }

  get port(): number {
    return this.#port;
  }

  /** SGLang prefill: the room (exact decimal text) has been computed on DP rank `rank`. */
  registerRoom(room: string, promptTokens: number, rank = 0): void {
    this.handoffs.register(`room:${rank}:${room}`, promptTokens);
  }

  /** SGLang prefill: tells a decode that looks the room up which DP rank took it. */
  registerRoomRank(room: string, rank: number): void {
    this.handoffs.register(`rank:${room}`, rank);
  }

  /** vLLM Mooncake prefill: the transfer has been computed. */
  registerTransfer(transferId: string, promptTokens: number): void {
    this.handoffs.register(`xfer:${transferId}`, promptTokens);
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const [path = '/', query = ''] = (req.url ?? '/').split('?');
    if (req.method === 'GET' && path === '/health') return sendText(res, 200, 'OK');
    if (req.method === 'PUT' && path === '/route') {
      const body = await readBody(req);
      this.#routes.push(JSON.parse(body || 'null'));
      return sendText(res, 200, 'OK');
    }
    if (req.method === 'GET' && path === '/route') {
      const info = {
        prefill_attn_tp_size: 1,
        prefill_dp_size: this.#opts.dpSize,
        prefill_pp_size: 1,
        prefill_page_size: 16,
        ...(this.#opts.loadBalanceMethod ? { load_balance_method: this.#opts.loadBalanceMethod } : {}),
        registered: this.#routes,
      };
      return sendJson(res, 200, JSON.stringify(info));
    }
    if (req.method === 'GET' && path === '/query') {
      // vLLM's `MooncakeBootstrapServer.query`: {dp_rank: {engine_id, worker_addr: {tp_rank: {pp_rank: addr}}}}.
      const addr = this.#opts.workerAddr?.() ?? '';
      const entries = this.#opts.engineIds.map((id, rank) => [String(rank), { engine_id: id, worker_addr: { '0': { '0': addr } } }]);
      return sendJson(res, 200, JSON.stringify(Object.fromEntries(entries)));
    }
    if (req.method === 'GET' && (path.startsWith(ROOM_WAIT_PATH) || path.startsWith(ROOM_RANK_WAIT_PATH))) {
      const ranks = path.startsWith(ROOM_RANK_WAIT_PATH);
      const text = path.slice((ranks ? ROOM_RANK_WAIT_PATH : ROOM_WAIT_PATH).length);
      const room = canonicalRoom(decodeURIComponent(text));
      if (room === undefined) return sendJson(res, 400, JSON.stringify({ error: `invalid room ${text}` }));
      if (ranks) return this.#wait(res, `rank:${room}`, `the rank of room ${room}`, query, 'rank');
      const rank = Number(new URLSearchParams(query).get('rank') ?? 0) || 0;
      return this.#wait(res, `room:${rank}:${room}`, `room ${room}`, query);
    }
    if (req.method === 'GET' && path.startsWith(TRANSFER_WAIT_PATH)) {
      const id = decodeURIComponent(path.slice(TRANSFER_WAIT_PATH.length));
      return this.#wait(res, `xfer:${id}`, `transfer ${id}`, query);
    }
    sendJson(res, 404, '{"detail":"Not Found"}');
  }

  #wait(res: ServerResponse, key: string, what: string, query: string, field: 'prompt_tokens' | 'rank' = 'prompt_tokens'): void {
    const waitMs = Math.min(MAX_WAIT_MS, Math.max(0, Number(new URLSearchParams(query).get('wait_ms') ?? 0) || 0));
    const cancel = this.handoffs.wait(key, waitMs, (entry) => {
      if (entry) {
        this.#opts.onHandoff?.(key);
        sendJson(res, 200, JSON.stringify({ [field]: entry.promptTokens }));
      } else sendJson(res, 404, JSON.stringify({ error: `${what} was not registered within ${waitMs} ms` }));
    });
    // A decode that gives up (its client left) must not consume the handoff.
    res.once('close', cancel);
  }

  close(): Promise<void> {
    this.handoffs.close();
    return new Promise((resolve) => {
      this.#server.closeAllConnections();
      this.#server.close(() => resolve());
    });
  }
}
