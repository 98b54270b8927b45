/**
 * Cuts a byte stream into lines. A partial last line is held until its newline arrives (or `flush`), so two
 * services writing at once never interleave inside a line of the combined output.
 */
export class LineSplitter {
  private pending = '';

  constructor(private readonly onLine: (line: string) => void) {}

  push(chunk: Buffer | string): void {
    const text = this.pending + chunk.toString();
    const lines = text.split('\n');
    this.pending = lines.pop() ?? '';
    for (const line of lines) this.emit(line);
  }

  flush(): void {
    if (this.pending) this.emit(this.pending);
    this.pending = '';
  }

  private emit(line: string): void {
    const trimmed = line.endsWith('\r') ? line.slice(0, -1) : line;
    if (trimmed.length > 0) this.onLine(trimmed);
  }
}
