module.exports = { ...require('../../jest.preset.js'), displayName: 'manifests', rootDir: __dirname };
