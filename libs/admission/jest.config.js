module.exports = { ...require('../../jest.preset.js'), displayName: 'admission', rootDir: __dirname };
