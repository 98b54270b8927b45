/**
 * Lets work that only informs others (the gateway's NATS flush of dispatch events and affinity records) wait
 * until the legs dispatched so far are written. The gateway's own client (h1/) writes a leg on an idle kept-alive
 * socket within the dispatch call, and on a new one once it connects; undici writes a leg on a kept-alive socket from its own
 * setImmediate (its idle-socket check), queued when the leg is dispatched; a socket write queued before it wakes
 * another process, and on a busy machine the gateway can lose its core to that process before the leg's write.
 *
 * A leg counts from its dispatch to the transport's `onConnect`, which both call right before they write the request,
 * in the same synchronous call: the waiting work runs on the microtask after that call, i.e. after the write.
 * A leg that waits for a new connection (or never gets one) would hold the work back for as long: the work runs
 * at the latest one check phase after the one that follows the request.
 */
let unwritten = 0;
let waiting: (() => void)[] = [];
let fallbackQueued = false;

function runWaiting(): void {
  fallbackQueued = false;
  if (waiting.length === 0) return;
  const run = waiting;
  waiting = [];
  for (const fn of run) fn();
}

/** A leg was handed to the transport: its write is pending. */
export function legWritePending(): void {
  unwritten++;
}

/** The transport is writing the leg now (or it settled without a write): it no longer holds the waiting work back. */
export function legWriteDone(): void {
  if (unwritten > 0) unwritten--;
  if (unwritten === 0 && waiting.length > 0) queueMicrotask(runWaiting);
}

/** Runs `fn` now when no leg's write is pending, else right after the last pending write (or the fallback above). */
export function afterLegWrites(fn: () => void): void {
  if (unwritten === 0) {
    fn();
    return;
  }
  waiting.push(fn);
  if (!fallbackQueued) {
    fallbackQueued = true;
    // From an immediate queued by an immediate: after every immediate of this check phase (the legs' writes),
    // wherever this was called from.
    setImmediate(queueFallback);
  }
}

function queueFallback(): void {
  setImmediate(runWaiting);
}
