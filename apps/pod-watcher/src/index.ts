// Only `main` is a value export: the CLI requires this package for `triad pod-watcher --help` too, and the
// watcher's modules (NATS, undici, the sources) load when main() starts one.
export { main } from './cli';
export type { PodWatcher, StartPodWatcherOptions } from './watcher';
export type { WatcherConfig, SourceSpec } from './config';
