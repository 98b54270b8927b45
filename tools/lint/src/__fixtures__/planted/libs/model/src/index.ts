// A domain lib with a planted bad import of an infra lib and of node:http.
import { send } from '@fx/wire';
import { createServer } from 'node:http';
// import { ignored } from '@fx/app';  (comments do not count)
export const model = { send, createServer };
