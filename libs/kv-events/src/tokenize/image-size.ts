/** Width and height of an image, read from its header (what the engine's PIL would report). */
export interface ImageSize {
  readonly width: number;
  readonly height: number;
}

/** The bytes of a base64 `data:` URL, or undefined for any other URL (the gateway never downloads media). */
export function dataUrlBytes(url: string): Buffer | undefined {
  const m = /^data:[^;,]*(;[^,]*)?;base64,/i.exec(url);
  return m ? Buffer.from(url.slice(m[0].length), 'base64') : undefined;
}

function pngSize(b: Buffer): ImageSize | undefined {
  // Signature, then the IHDR chunk: length(4) "IHDR" width(4) height(4), big-endian.
  if (b.length < 24 || b.readUInt32BE(0) !== 0x89504e47 || b.toString('latin1', 12, 16) !== 'IHDR') return undefined;
  return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
}

function gifSize(b: Buffer): ImageSize | undefined {
  if (b.length < 10 || b.toString('latin1', 0, 3) !== 'GIF') return undefined;
  return { width: b.readUInt16LE(6), height: b.readUInt16LE(8) };
}

function jpegSize(b: Buffer): ImageSize | undefined {
  if (b.length < 4 || b[0] !== 0xff || b[1] !== 0xd8) return undefined;
  let i = 2;
  while (i + 9 < b.length) {
    if (b[i] !== 0xff) return undefined;
    const marker = b[i + 1];
    if (marker === 0xff) {
      i++;
      continue;
    }
    const length = b.readUInt16BE(i + 2);
    // Start-of-frame markers (all but DHT c4, JPG c8, DAC cc) carry precision(1) height(2) width(2).
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      return { height: b.readUInt16BE(i + 5), width: b.readUInt16BE(i + 7) };
    }
    i += 2 + length;
  }
  return undefined;
}

function webpSize(b: Buffer): ImageSize | undefined {
  if (b.length < 30 || b.toString('latin1', 0, 4) !== 'RIFF' || b.toString('latin1', 8, 12) !== 'WEBP') return undefined;
  const chunk = b.toString('latin1', 12, 16);
  if (chunk === 'VP8X') return { width: 1 + b.readUIntLE(24, 3), height: 1 + b.readUIntLE(27, 3) };
  if (chunk === 'VP8 ') return { width: b.readUInt16LE(26) & 0x3fff, height: b.readUInt16LE(28) & 0x3fff };
  if (chunk === 'VP8L') {
    const bits = b.readUInt32LE(21);
    return { width: (bits & 0x3fff) + 1, height: ((bits >> 14) & 0x3fff) + 1 };
  }
  return undefined;
}

/**
 * The size of a PNG, JPEG, GIF or WebP image from its header, without decoding it. EXIF orientation is not
 * applied (vLLM's loader does not transpose either). Undefined for other formats or a truncated header.
 */
export function imageSize(bytes: Buffer): ImageSize | undefined {
  return pngSize(bytes) ?? jpegSize(bytes) ?? gifSize(bytes) ?? webpSize(bytes);
}
