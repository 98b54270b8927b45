export { Bus, connectBus } from './bus';
export type { BusOptions, BusLogger, HeaderMap, ReceiveContext } from './bus';
export { TypedKv } from './typed-kv';
export type { TypedKvOptions, KvChange, KvWatchHandle } from './typed-kv';
export { startDispatchFeed } from './dispatch-feed';
export type { DispatchSink, DispatchFeedOptions } from './dispatch-feed';
export { retryJetStream, isTransientJetStreamError, DEFAULT_JS_RETRY_BUDGET_MS } from './js-retry';
export type { JetStreamRetryOptions } from './js-retry';
