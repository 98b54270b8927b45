import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { RuleTester } from 'eslint';
import tseslint from 'typescript-eslint';
import { rules } from './index.mjs';

// Files are named inside a fixture workspace (tools/lint/src/__fixtures__/planted) whose package.json files carry
// the nx tags: @fx/app (type:app), @fx/model (type:domain), @fx/wire (type:infra), @fx/util (type:util, exports
// `.` and `./extra`), @fx/bus (type:contract, `./client` typed type:infra), @fx/testkit (type:testing),
// @fx/untagged (no type tag).
const fixture = join(__dirname, '..', '__fixtures__', 'planted');
const at = (path) => join(fixture, path);
const model = at('libs/model/src/model.ts');
const modelTest = at('libs/model/src/model.test.ts');
const app = at('apps/app/src/main.ts');
const wire = at('libs/wire/src/wire.ts');

const tester = new RuleTester({ languageOptions: { parser: tseslint.parser, ecmaVersion: 2023, sourceType: 'module' } });

describe('triad ESLint plugin', () => {
  tester.run('tag-boundaries', rules['tag-boundaries'], {
    valid: [
      { filename: model, code: "import { util } from '@fx/util';\nimport { bus } from '@fx/bus';" },
      { filename: app, code: "import { model } from '@fx/model';\nimport { client } from '@fx/bus/client';" },
      { filename: model, code: "import { testkit } from '@fx/testkit';" },
      { filename: at('libs/model/jest.config.ts'), code: "import { app } from '@fx/app';" },
      { filename: at('outside/file.ts'), code: "import { app } from '@fx/app';" },
    ],
    invalid: [
      {
        filename: model,
        code: "import { send } from '@fx/wire';",
        errors: [{ message: 'a type:domain project (@fx/model) may not import a type:infra project (@fx/wire)' }],
      },
      { filename: model, code: "import type { Client } from '@fx/bus/client';", errors: [{ messageId: 'boundary' }] },
      { filename: wire, code: "export type { App } from '@fx/app';", errors: [{ messageId: 'boundary' }] },
      { filename: wire, code: "const app = await import('@fx/app');", errors: [{ messageId: 'boundary' }] },
      { filename: wire, code: "const app = require('@fx/app');", errors: [{ messageId: 'boundary' }] },
      { filename: wire, code: "import app = require('@fx/app');", errors: [{ messageId: 'boundary' }] },
      { filename: wire, code: "type App = import('@fx/app').App;", errors: [{ messageId: 'boundary' }] },
      {
        filename: at('libs/untagged/src/index.ts'),
        code: 'export const x = 1;',
        errors: [{ message: 'project @fx/untagged has no known type:* tag in package.json nx.tags' }],
      },
    ],
  });

  tester.run('testing-in-tests', rules['testing-in-tests'], {
    valid: [
      { filename: modelTest, code: "import { testkit } from '@fx/testkit';" },
      { filename: at('libs/model/test/helpers.ts'), code: "import { testkit } from '@fx/testkit';" },
      { filename: at('libs/testkit/src/more.ts'), code: "import { testkit } from '@fx/testkit';" },
    ],
    invalid: [
      {
        filename: model,
        code: "import { testkit } from '@fx/testkit';",
        errors: [{ message: '@fx/testkit (type:testing) may only be imported from tests' }],
      },
    ],
  });

  tester.run('domain-no-io', rules['domain-no-io'], {
    valid: [
      { filename: model, code: "import { createHash } from 'node:crypto';\nimport { z } from 'zod';" },
      { filename: modelTest, code: "import { createServer } from 'node:http';" },
      { filename: wire, code: "import { connect } from '@nats-io/transport-node';" },
    ],
    invalid: [
      {
        filename: model,
        code: "import { createServer } from 'node:http';",
        errors: [{ message: "type:domain project @fx/model may not import I/O module 'node:http'" }],
      },
      { filename: model, code: "import { readFileSync } from 'fs';", errors: [{ messageId: 'domainIo' }] },
      { filename: model, code: "import { readFile } from 'node:fs/promises';", errors: [{ messageId: 'domainIo' }] },
      { filename: model, code: "import { connect } from '@nats-io/transport-node';", errors: [{ messageId: 'domainIo' }] },
      { filename: model, code: "import { NodeSDK } from '@opentelemetry/sdk-node';", errors: [{ messageId: 'domainIo' }] },
    ],
  });

  tester.run('no-deep-import', rules['no-deep-import'], {
    valid: [
      { filename: model, code: "import { extra } from '@fx/util/extra';" },
      { filename: model, code: "import { x } from './internal/x';" },
    ],
    invalid: [
      {
        filename: model,
        code: "import { x } from '@fx/util/src/index';",
        errors: [{ message: "'@fx/util/src/index' reaches into @fx/util; import one of its package exports" }],
      },
      { filename: app, code: "import { model } from '@fx/model/src/model';", errors: [{ messageId: 'deepImport' }] },
    ],
  });

  tester.run('no-relative-escape', rules['no-relative-escape'], {
    valid: [
      { filename: model, code: "import { x } from './x';\nimport { y } from '../test/y';" },
      { filename: at('apps/app/jest.config.js'), code: "const preset = require('../../jest.preset.js');" },
    ],
    invalid: [
      {
        filename: app,
        code: "import { helper } from '../../../libs/wire/src/index';",
        errors: [{ message: "relative import '../../../libs/wire/src/index' leaves project @fx/app; import the package instead" }],
      },
    ],
  });

  tester.run('declared-dependency', rules['declared-dependency'], {
    valid: [
      { filename: app, code: "import { model } from '@fx/model';" },
      { filename: modelTest, code: "import { testkit } from '@fx/testkit';" },
      { filename: app, code: "import { z } from 'zod';" },
    ],
    invalid: [
      {
        filename: app,
        code: "import { util } from '@fx/util';",
        errors: [{ message: '@fx/app imports @fx/util but does not list it in package.json dependencies' }],
      },
    ],
  });

  tester.run('no-export-all', rules['no-export-all'], {
    valid: [
      { filename: wire, code: "export { send } from './send';" },
      { filename: at('libs/wire/src/wire.test.ts'), code: "export * from './send';" },
      { filename: wire, code: "export * as send from './send';" },
    ],
    invalid: [{ filename: wire, code: "export * from './send';", errors: [{ messageId: 'exportAll' }] }],
  });

  tester.run('no-console-in-libs', rules['no-console-in-libs'], {
    valid: [
      { filename: app, code: "console.log('apps may print');" },
      { filename: at('libs/wire/test/helpers.ts'), code: "console.log('tests may print');" },
      { filename: wire, code: 'const console = { log() {} };\nconsole.log(1);' },
      { filename: wire, code: 'function f(console: { log(): void }) { console.log(); }' },
    ],
    invalid: [
      {
        filename: wire,
        code: "console.warn('no');",
        errors: [{ message: 'libraries log through the logger they are given, not console' }],
      },
      { filename: model, code: 'const log = console.log;\nlog(1);', errors: [{ messageId: 'console' }] },
      { filename: at('libs/util/src/index.ts'), code: "console.error('no');", errors: [{ messageId: 'console' }] },
    ],
  });

  it('the workspace configuration turns every rule of the plugin on for project sources', () => {
    // A child process: ESLint loads eslint.config.mjs with import(), which jest's CommonJS sandbox does not offer.
    const root = join(__dirname, '..', '..', '..', '..');
    const eslintBin = join(root, 'node_modules/eslint/bin/eslint.js');
    const args = [eslintBin, '--print-config', 'libs/request/src/index.ts'];
    const printed = spawnSync(process.execPath, args, { cwd: root, encoding: 'utf8' });
    expect(printed.status).toBe(0);
    const config = JSON.parse(printed.stdout);
    const triadRules = Object.entries(config.rules).filter(([name]) => name.startsWith('triad/'));
    const expected = Object.keys(rules).map((name) => [`triad/${name}`, [2]]);
    expect(Object.fromEntries(triadRules)).toEqual(Object.fromEntries(expected));
  });
});
