import type * as Zmq from 'zeromq';

let loaded: typeof Zmq | undefined;

/**
 * The zeromq native module, loaded on first use: processes that import this library without opening a socket
 * (a gateway that only hashes prompts) never load libzmq, and a test process loads it only in the tests that
 * use sockets (a native addon keeps the JS classes of the first module registry that loaded it).
 */
export function zmq(): typeof Zmq {
  loaded ??= require('zeromq') as typeof Zmq;
  return loaded;
}
