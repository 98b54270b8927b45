// `@triad/scheduling/hashing`: the plain-JS hashes that services share without the scheduler itself (the
// pod-watcher's shard ring and scrape spreading, the KV-event indexers' shards).
export { hashString32 } from './fast-hash';
export { rendezvousOwner } from './rendezvous';
