// Planted: a test importing a package listed in dependencies, and one not listed at all.
const only = require('only-in-tests');
const helper = require('test-helper');
module.exports = { only, helper };
