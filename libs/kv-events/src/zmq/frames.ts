/** Sequence numbers travel as 8-byte big-endian integers; -1 (all ones) ends a replay. */
export const END_OF_REPLAY = -1;

export function seqBytes(seq: number): Buffer {
  const b = Buffer.alloc(8);
  if (seq < 0) b.writeBigInt64BE(BigInt(seq));
  else b.writeBigUInt64BE(BigInt(seq));
  return b;
}

/** Reads a sequence frame; undefined when it is not 8 bytes or not a safe integer. -1 is the end-of-replay marker. */
export function readSeq(frame: Buffer | undefined): number | undefined {
  if (frame === undefined || frame.length !== 8) return undefined;
  const signed = frame.readBigInt64BE();
  if (signed === -1n) return END_OF_REPLAY;
  const v = frame.readBigUInt64BE();
  return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : undefined;
}
