import { hash, randomUUID } from 'node:crypto';
import type { EncoderChoice } from '@triad/bus';
import { ErrorCode } from '@triad/errors';
import { SchedulingError, type MediaPart } from '@triad/request';

/**
 * The `uuid` an item carries to its encoder and its consumer, so both key the encoder cache alike: the client's own,
 * else a content key, SHA-256 hex of the item's URL (as vLLM's proxy does), or of the inline payload (`input_audio`).
 * A cryptographic hash on purpose: the engines trust the uuid as the content's identity across requests.
 */
export function itemUuid(part: MediaPart): string {
  if (part.uuid !== undefined) return part.uuid;
  const payload = part.source !== '' ? part.source : JSON.stringify(part.part);
  return hash('sha256', payload, 'hex');
}

/** A fresh EC transfer id (a uuid4 as 32 hex digits, vLLM's `uuid.uuid4().hex`); new on every encoder try. */
export function newTransferId(): string {
  return randomUUID().replaceAll('-', '');
}

/** Media items sent in one encoder request: same encoder, images only when more than one. */
export interface EncoderGroup {
  /** The decision's choice for the group's first item (its endpoint and alternates serve the whole group). */
  readonly choice: EncoderChoice;
  readonly parts: readonly MediaPart[];
}

function choiceFor(choices: readonly EncoderChoice[], item: number): EncoderChoice {
  const direct = choices[item];
  if (direct !== undefined && direct.item === item) return direct;
  const found = choices.find((c) => c.item === item);
  if (found === undefined)
    throw new SchedulingError(ErrorCode.SchedNoEncoder, `no encoder was chosen for media item ${item}`, { stage: 'encode', item });
  return found;
}

/**
 * Groups a request's media items into encoder requests (vLLM's proxy, #57095): images the decision sends to the
 * same encoder travel together in input order, at most `maxBatch` per request (0 = no bound); audio and video go
 * alone. Groups come in the order of their first item.
 */
export function groupItems(media: readonly MediaPart[], choices: readonly EncoderChoice[], maxBatch: number): EncoderGroup[] {
  const groups: { choice: EncoderChoice; parts: MediaPart[] }[] = [];
  const open = new Map<string, { choice: EncoderChoice; parts: MediaPart[] }>();
  for (const part of media) {
    const choice = choiceFor(choices, part.index);
    if (part.modality !== 'image') {
      groups.push({ choice, parts: [part] });
      continue;
    }
    const key = choice.endpoint.key;
    let group = open.get(key);
    if (group === undefined || (maxBatch > 0 && group.parts.length >= maxBatch)) {
      group = { choice, parts: [] };
      open.set(key, group);
      groups.push(group);
    }
    group.parts.push(part);
  }
  return groups;
}
