module.exports = { ...require('../../jest.preset.js'), displayName: 'pod-watcher', rootDir: __dirname };
