#!/usr/bin/env node
'use strict';
// The `triad` command. TypeScript sources run through tsx's require hook, so `npm ci` is the only setup;
// container images run the esbuild bundle (dist/apps/cli/main.cjs) instead. Runtime code loads lazily with
// require(), not import(), because the hook covers require only.
require('tsx/cjs/api').register();
require('../src/main.ts');
