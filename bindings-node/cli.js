#!/usr/bin/env node
'use strict';
// The `honker` command the package installs (`npx honker status app.db`,
// README "The `honker` command"): the operator's command of the Rust crate,
// run inside the native addon, so installing the package is enough. It runs
// on this thread until it is done: `tail --follow` and `listen` wait here,
// and Ctrl-C ends them (nothing in this process handles SIGINT).

let addon;
try {
  ({ addon } = require('./binding.js').load());
} catch (e) {
  process.stderr.write(`${e.message}\n`);
  process.exit(1);
}
process.exitCode = addon.cliMain(['honker', ...process.argv.slice(2)]);
