'use strict';
// The native addon, found by ../binding.js (the prebuilt package for the
// platform), and the SQL extension's path.

const { addon, extensionPath } = require('../binding.js').load();

module.exports = { addon, extensionPath };
