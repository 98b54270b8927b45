// Only `main` is exported: the CLI requires this package for `triad kv-indexer --help` too.
export { main } from './cli';
