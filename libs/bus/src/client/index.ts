export { Bus, connectBus } from './bus';
export type { BusOptions, BusLogger, HeaderMap, ReceiveContext } from './bus';
export { TypedKv } from './typed-kv';
export type { TypedKvOptions, KvChange, KvWatchHandle } from './typed-kv';
export { startDispatchFeed } from './dispatch-feed';
export type { DispatchSink, DispatchFeedOptions } from './dispatch-feed';
export { startAffinityFeed } from './affinity-feed';
export type { AffinitySink, AffinityFeed } from './affinity-feed';
