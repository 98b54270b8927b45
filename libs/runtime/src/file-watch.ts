import { watch, readFileSync, type FSWatcher } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';

/** Editors and ConfigMap updates write in several steps; wait this long after the last event before reading. */
const SETTLE_MS = 50;

export interface WatchFileOptions {
  /** Quiet time after the last directory event before the file is read (50 ms). */
  readonly settleMs?: number;
}

/**
 * Calls `onChange(text)` whenever the file's content changes: the one file watcher of Triad's hot-reloaded files
 * (configs, source files, mounted Secrets). It watches the directory rather than the file, so replace-by-rename
 * (editors, Kubernetes ConfigMap and Secret `..data` symlink swaps) is seen too; content is compared, not
 * timestamps (two quick edits of one size can share an mtime), and a read that returns the same text as last time
 * is ignored.
 */
export function watchFile(
  path: string,
  onChange: (text: string) => void,
  onError: (err: Error) => void,
  options: WatchFileOptions = {},
): { close(): void } {
  const settleMs = options.settleMs ?? SETTLE_MS;
  const full = resolve(path);
  let last = safeRead(full);
  let timer: NodeJS.Timeout | undefined;
  const check = () => {
    timer = undefined;
    const text = safeRead(full);
    if (text === undefined || text === last) return;
    last = text;
    onChange(text);
  };
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(dirname(full), (_event, name) => {
      // Only events for our file or for ConfigMap's `..data` swap matter; other files in the directory do not.
      if (name && name !== basename(full) && !name.startsWith('..')) return;
      if (timer) clearTimeout(timer);
      timer = setTimeout(check, settleMs);
    });
    watcher.on('error', onError);
  } catch (err) {
    onError(err as Error);
  }
  return {
    close: () => {
      if (timer) clearTimeout(timer);
      watcher?.close();
    },
  };
}

function safeRead(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}
