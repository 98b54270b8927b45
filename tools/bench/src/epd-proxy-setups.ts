// Engine-sim topologies and requests of the EPD proxy check (epd-proxy-check.ts): per EC connector the sims a
// real vLLM deployment would run, started in this process, and the counters that show where items were encoded.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSimEngine, type EcConnectorKind, type SimEngineHandle, type SimEngineOptions } from '@triad/engine-sim';

export const CHECK_MODEL = 'check-model';

export interface Setup {
  readonly connector: EcConnectorKind;
  /** `E→P→D` or `E→PD`. */
  readonly topology: string;
  readonly encoders: readonly SimEngineHandle[];
  readonly prefill?: SimEngineHandle;
  /** The decode (E→P→D) or the aggregated consumer (E→PD). */
  readonly decode: SimEngineHandle;
  /** Mooncake: the consumer's control addresses and DP size, for `--ec-consumer-zmq-addrs`. */
  readonly ecConsumerZmqAddrs?: readonly string[];
  readonly ecConsumerDpSize?: number;
  close(): Promise<void>;
}

/** Push waits are short here so a missing push shows as a failure in seconds, not vLLM's 60. */
const PUSH_WAIT_MS = 5_000;
const DP_SIZE = 2;

let hostSeq = 0;
/** Each sim on its own loopback address, as pods are. */
const nextHost = (): string => `127.0.${100 + Math.floor(hostSeq / 200)}.${(hostSeq++ % 200) + 10}`;

export async function startSetup(connector: EcConnectorKind, split: boolean): Promise<Setup> {
  const ecDir = connector === 'shared-storage' ? mkdtempSync(join(tmpdir(), 'triad-epd-check-')) : undefined;
  const handles: SimEngineHandle[] = [];
  const start = async (opts: Omit<SimEngineOptions, 'engine' | 'host' | 'model'>) => {
    const base = { engine: 'vllm', host: nextHost(), model: CHECK_MODEL, requestLogLimit: 0, ecConnector: connector } as const;
    const sim = await startSimEngine({ ...base, ...opts });
    handles.push(sim);
    return sim;
  };
  const close = async () => {
    await Promise.all(handles.map((h) => h.close()));
    if (ecDir) rmSync(ecDir, { recursive: true, force: true });
  };
  try {
    const ec = ecDir ? { sharedEcDir: ecDir } : {};
    const encoders = [await start({ role: 'encode', ...ec }), await start({ role: 'encode', ...ec })];
    if (split) {
      const prefill = await start({ role: 'prefill', enableMmEmbeds: true, ...ec });
      const decode = await start({ role: 'decode', enableMmEmbeds: true });
      return { connector, topology: 'E→P→D', encoders, prefill, decode, close };
    }
    const mooncake = connector === 'mooncake';
    const dp = mooncake ? { dataParallel: DP_SIZE, ecPushWaitTimeoutMs: PUSH_WAIT_MS } : {};
    const decode = await start({ role: 'both', enableMmEmbeds: true, ...ec, ...dp });
    return {
      connector,
      topology: 'E→PD',
      encoders,
      decode,
      close,
      ...(mooncake ? { ecConsumerZmqAddrs: decode.ecControlAddresses ?? [], ecConsumerDpSize: DP_SIZE } : {}),
    };
  } catch (err) {
    await close();
    throw err;
  }
}

export interface Case {
  readonly name: string;
  readonly content: unknown;
  readonly stream: boolean;
  /** Media items, and the encoder requests the newest proxy makes for them (images batched per encoder). */
  readonly items: number;
  readonly encoderRequests: number;
}

/** The check's requests; URLs are unique per setup so no item is found from an earlier case. */
export function cases(tag: string): Case[] {
  const text = { type: 'text', text: 'Describe what you see and hear.' };
  const image = (n: number) => ({ type: 'image_url', image_url: { url: `https://example.com/check/${tag}/image-${n}.png` } });
  const clip = { type: 'audio_url', audio_url: { url: `https://example.com/check/${tag}/clip.wav` } };
  const film = { type: 'video_url', video_url: { url: `https://example.com/check/${tag}/film.mp4` } };
  return [
    { name: '1 image', content: [text, image(1)], stream: false, items: 1, encoderRequests: 1 },
    { name: '1 image, stream', content: [text, image(2)], stream: true, items: 1, encoderRequests: 1 },
    // Round-robin puts images 1 and 3 on one encoder (one batched request) and image 2 on the other.
    { name: '3 images, 2 encoders', content: [text, image(3), image(4), image(5)], stream: false, items: 3, encoderRequests: 2 },
    { name: 'audio', content: [text, clip], stream: false, items: 1, encoderRequests: 1 },
    { name: 'video', content: [text, film], stream: false, items: 1, encoderRequests: 1 },
    { name: 'text only', content: 'What is disaggregated inference?', stream: false, items: 0, encoderRequests: 0 },
  ];
}

/** Sum of one counter over sims. */
export function total(sims: readonly SimEngineHandle[], name: string): number {
  return sims.reduce((n, s) => n + (s.counters()[name] ?? 0), 0);
}

/** The counters the check reads, summed per group of sims. */
export function snapshot(setup: Setup): Record<string, number> {
  const consumers = [...(setup.prefill ? [setup.prefill] : []), setup.decode];
  return {
    localEncodes: total(consumers, 'localEncodes'),
    failures: total(consumers, 'ecRequestsFailed') + total(consumers, 'pushWaitTimeouts'),
    encoderRequests: total(setup.encoders, 'encoderRequests'),
    encoderItems: total(setup.encoders, 'encoderItems'),
    ecHits: total(consumers, 'ecHits'),
    pulls: total(setup.encoders, 'ecPullsServed'),
    pushes: total(consumers, 'pushesReceived'),
    embeds: total(consumers, 'embedsParts'),
  };
}
