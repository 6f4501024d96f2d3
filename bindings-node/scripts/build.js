#!/usr/bin/env node
// Builds the native addon from source with cargo (the package's `install`
// script, so `npm install <path to bindings-node>` works on any machine with
// a Rust toolchain) and copies it to honker.node. HONKER_NODE_PROFILE=debug
// builds without optimizations.
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const here = path.resolve(__dirname, '..');
const manifest = path.join(here, 'Cargo.toml');
const profile = process.env.HONKER_NODE_PROFILE === 'debug' ? 'debug' : 'release';
const args = ['build', '--locked', '--manifest-path', manifest, '--message-format', 'json-render-diagnostics'];
if (profile === 'release') args.push('--release');

let out;
try {
  out = execFileSync(process.env.CARGO || 'cargo', args, {
    cwd: here,
    stdio: ['ignore', 'pipe', 'inherit'],
    maxBuffer: 64 << 20,
  });
} catch (e) {
  console.error('honker: building the native addon failed; it needs a Rust toolchain (https://rustup.rs)');
  process.exit(1);
}
// cargo says where the library landed (the workspace's target directory).
let lib;
for (const line of out.toString().split('\n')) {
  if (!line.startsWith('{')) continue;
  const msg = JSON.parse(line);
  if (msg.reason === 'compiler-artifact' && msg.target && msg.target.name === 'honker_node') {
    lib = msg.filenames.find((f) => /\.(so|dylib|dll)$/.test(f));
  }
}
if (!lib) {
  console.error('honker: cargo reported no honker_node library');
  process.exit(1);
}
// Release builds are copied without their debug info (the release profile
// keeps `debug = 1` for backtraces during development: 37 MB instead of 4).
const dest = path.join(here, 'honker.node');
let stripped = false;
if (profile === 'release') {
  try {
    execFileSync('strip', ['--strip-unneeded', '-o', dest, lib], { stdio: 'inherit' });
    stripped = true;
  } catch {
    // no strip on this machine: ship it as it is
  }
}
if (!stripped) fs.copyFileSync(lib, dest);
