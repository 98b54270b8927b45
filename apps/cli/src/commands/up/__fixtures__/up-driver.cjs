'use strict';
// Runs startStack in a process of its own, so a test can SIGKILL this "triad up" and check that the watchdog
// stops every service it left behind. Usage: node up-driver.cjs CONFIG GATEWAY_PORT CLI_ENTRY
require('tsx/cjs/api').register();
const { startStack } = require('../stack.ts');

const [configPath, port, cliEntry] = process.argv.slice(2);
startStack(
  { configPath, port: Number(port), host: '127.0.0.1', nats: { kind: 'spawn' }, simLatency: 'zero', rawLogs: true, readyTimeoutMs: 60000, stopTimeoutMs: 2000 },
  { cliEntry, out: process.stderr, env: process.env, color: false },
).then(
  (stack) => process.stdout.write(`READY ${JSON.stringify(stack.pids())}\n`),
  (err) => {
    process.stderr.write(`driver: ${err.message}\n`);
    process.exit(1);
  },
);
