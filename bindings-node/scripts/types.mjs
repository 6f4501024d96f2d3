#!/usr/bin/env node
// Regenerates native.d.ts from the Rust code (`npm run types`; the test
// command runs it and fails if the file changed). It builds the addon with
// scripts/build.js (the same build, so nothing is built twice; `--zig` is
// passed on) with napi-derive writing its type definitions to a scratch
// folder, and @napi-rs/cli's own generateTypeDef turns them into the
// declaration file. (`napi build` would pass --target and build every
// dependency again in a second directory.) `--from DIR` skips the build and
// reads the type definitions a `build.js --typedefs DIR` wrote.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateTypeDef } from '@napi-rs/cli';

const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const from = args.includes('--from') ? path.resolve(args[args.indexOf('--from') + 1]) : null;
const scratch = from || fs.mkdtempSync(path.join(os.tmpdir(), 'honker-typedef-'));
try {
  if (!from) {
    execFileSync(process.execPath, [path.join(here, 'scripts', 'build.js'), '--typedefs', scratch, ...args], {
      stdio: 'inherit',
    });
  }
  const { dts } = await generateTypeDef({ typeDefDir: scratch, cwd: here });
  if (!dts) throw new Error('napi-derive wrote no type definitions');
  fs.writeFileSync(path.join(here, 'native.d.ts'), dts);
} finally {
  if (!from) fs.rmSync(scratch, { recursive: true, force: true });
}
