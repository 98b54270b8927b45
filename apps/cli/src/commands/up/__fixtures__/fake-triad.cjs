'use strict';
// A stand-in for the `triad` entry script in the supervisor tests: each service is only an ops server (/readyz)
// plus, for the gateway, its data port, each on the address it is told (--metrics-host, --host) as the real ones. The scheduler also starts a grandchild that ignores SIGTERM, to prove
// that stopping a service stops its whole process group. FAKE_TRIAD_FAIL=<service> makes that one exit at once.
const http = require('node:http');
const { spawn } = require('node:child_process');

const [command, ...args] = process.argv.slice(2);
const flag = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const log = (msg, extra) => process.stdout.write(`${JSON.stringify({ level: 'info', time: new Date().toISOString(), service: command, msg, ...extra })}\n`);

if (process.env.FAKE_TRIAD_FAIL === command) {
  process.stderr.write(`${command}: failing on purpose\n`);
  process.exit(3);
}

const servers = [];
const listen = (port, host, handler) => {
  const server = http.createServer(handler);
  server.listen(Number(port), host);
  servers.push(server);
};
listen(flag('--metrics-port'), flag('--metrics-host') ?? '0.0.0.0', (req, res) => {
  const ok = req.url === '/readyz' || req.url === '/healthz';
  res.writeHead(ok ? 200 : 404, { 'content-type': 'text/plain' }).end(ok ? 'ok' : 'not found');
});
if (command === 'gateway') listen(flag('--port'), flag('--host') ?? '0.0.0.0', (_req, res) => res.writeHead(404).end());
if (command === 'scheduler') {
  const grandchild = spawn(process.execPath, ['-e', "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000);"], { stdio: 'ignore' });
  log('grandchild started', { grandchildPid: grandchild.pid });
}
log('fake service started', { args });
process.on('SIGTERM', () => {
  log('stopping');
  for (const s of servers) s.close();
  process.exit(0);
});
