#!/usr/bin/env node
// The package's `install` script. With the prebuilt package for this platform
// installed (the usual case), it does nothing. In a checkout of the
// repository with no addon built yet, it builds one from source (the
// fallback: it needs Rust, and says so when cargo is missing). Anywhere else
// it prints what is missing and exits 0, so an install on a machine that only
// packs or copies node_modules still succeeds; `require('honker')` then fails
// with the same explanation.
'use strict';
const { execFileSync } = require('node:child_process');
const path = require('node:path');
const { locate, isCheckout, NativeBindingError } = require('../binding.js');

try {
  locate();
  process.exit(0);
} catch (e) {
  if (!(e instanceof NativeBindingError)) throw e;
  if (!isCheckout()) {
    console.warn(e.message);
    process.exit(0);
  }
}
console.error('honker: no native addon in this checkout yet: building it from source (npm run build)');
try {
  execFileSync(process.execPath, [path.join(__dirname, 'build.js')], { stdio: 'inherit' });
} catch {
  process.exit(1);
}
