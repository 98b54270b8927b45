import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readBody } from '../http/body';
import { sendJson, sendText } from '../http/respond';
import { canonicalRoom } from './bootstrap-fields';
import { RoomRegistry } from './room-registry';

/** Path prefix of the long-poll a simulated decode uses to wait for a room. */
export const ROOM_WAIT_PATH = '/sim/rooms/';
const MAX_WAIT_MS = 600_000;

/**
 * The bootstrap HTTP server a SGLang prefill runs on `--disaggregation-bootstrap-port` (default 8998): `GET /health`
 * answers "OK", `PUT/GET /route` register and describe the prefill ranks, and the simulator adds
 * `GET /sim/rooms/<room>?wait_ms=N`, where a decode waits until the prefill has computed that room.
 */
export class BootstrapServer {
  readonly rooms: RoomRegistry;
  readonly #server: Server;
  readonly #dpSize: number;
  #routes: unknown[] = [];
  #port = 0;

  private constructor(dpSize: number, leaseMs: number) {
    this.#dpSize = dpSize;
    this.rooms = new RoomRegistry(leaseMs);
    this.#server = createServer((req, res) => {
      this.#handle(req, res).catch(() => sendText(res, 500, 'internal error'));
    });
    this.#server.keepAliveTimeout = 5_000;
  }

  static async start(host: string, port: number, dpSize: number, leaseMs = 60_000): Promise<BootstrapServer> {
    const server = new BootstrapServer(dpSize, leaseMs);
    await new Promise<void>((resolve, reject) => {
      server.#server.once('error', reject);
      server.#server.listen(port, host, () => {
        server.#server.off('error', reject);
        resolve();
      });
    });
    server.#port = (server.#server.address() as AddressInfo).port;
    return server;
  }

  get port(): number {
    return this.#port;
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
      const info = { prefill_attn_tp_size: 1, prefill_dp_size: this.#dpSize, prefill_pp_size: 1, prefill_page_size: 16, registered: this.#routes };
      return sendJson(res, 200, JSON.stringify(info));
    }
    if (req.method === 'GET' && path.startsWith(ROOM_WAIT_PATH)) return this.#waitForRoom(req, res, path.slice(ROOM_WAIT_PATH.length), query);
    sendJson(res, 404, '{"detail":"Not Found"}');
  }

  #waitForRoom(req: IncomingMessage, res: ServerResponse, rawRoom: string, query: string): void {
    const room = canonicalRoom(decodeURIComponent(rawRoom));
    if (room === undefined) return sendJson(res, 400, JSON.stringify({ error: `invalid room ${rawRoom}` }));
    const waitMs = Math.min(MAX_WAIT_MS, Math.max(0, Number(new URLSearchParams(query).get('wait_ms') ?? 0) || 0));
    const cancel = this.rooms.wait(room, waitMs, (entry) => {
      if (entry) sendJson(res, 200, JSON.stringify({ room: entry.room, prompt_tokens: entry.promptTokens }));
      else sendJson(res, 404, JSON.stringify({ error: `room ${room} was not registered within ${waitMs} ms` }));
    });
    // A decode that gives up (its client left) must not consume the room.
    res.once('close', cancel);
  }

  close(): Promise<void> {
    this.rooms.close();
    return new Promise((resolve) => {
      this.#server.closeAllConnections();
      this.#server.close(() => resolve());
    });
  }
}
