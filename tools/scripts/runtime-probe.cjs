'use strict';
// Loads packages from a built app directory the way its bundle does (require by name from the directory) and prints,
// as JSON, every file below its node_modules that the load read: JavaScript modules, native addons (dlopen, a
// failed attempt included) and data files read through fs (zeromq's addon manifest). runtime-deps.mjs keeps those
// and drops the rest. Usage: node runtime-probe.cjs DIR PACKAGE...
const fs = require('node:fs');
const path = require('node:path');
const { createRequire } = require('node:module');

const [dir, ...names] = process.argv.slice(2);
const modules = path.join(path.resolve(dir), 'node_modules') + path.sep;
const read = new Set();
const note = (file) => {
  if (typeof file !== 'string') return;
  const abs = path.resolve(file);
  if (abs.startsWith(modules)) read.add(abs);
};
const dlopen = process.dlopen;
process.dlopen = function (module, filename, ...rest) {
  note(filename);
  return dlopen.call(this, module, filename, ...rest);
};
for (const name of ['readFileSync', 'openSync', 'existsSync', 'statSync']) {
  const original = fs[name];
  fs[name] = function (file, ...rest) {
    note(file);
    return original.call(this, file, ...rest);
  };
}
const load = createRequire(path.join(path.resolve(dir), 'runtime-probe.js'));
for (const name of names) load(name);
for (const file of Object.keys(require.cache)) note(file);
process.stdout.write(JSON.stringify([...read].sort()));
