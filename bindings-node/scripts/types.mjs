#!/usr/bin/env node
// Regenerates native.d.ts from the Rust code (`npm run types`; the test
// command runs it and fails if the file changed). cargo builds the addon as
// the install script does (same target directory and profile, so nothing is
// built twice) with napi-derive writing its type definitions to a scratch
// folder, and @napi-rs/cli's own generateTypeDef turns them into the
// declaration file. (`napi build` would pass --target and build every
// dependency again in a second directory.)
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateTypeDef } from '@napi-rs/cli';

const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'honker-typedef-'));
try {
  execFileSync(
    process.env.CARGO || 'cargo',
    ['build', '--locked', '--release', '--manifest-path', path.join(here, 'Cargo.toml')],
    {
      cwd: here,
      stdio: ['ignore', 'ignore', 'inherit'],
      // napi-derive writes type definitions only when this folder is set, and
      // the second variable makes cargo re-run it even if nothing changed.
      env: {
        ...process.env,
        NAPI_TYPE_DEF_TMP_FOLDER: scratch,
        NAPI_FORCE_BUILD_HONKER_NODE: String(Date.now()),
      },
    },
  );
  const { dts } = await generateTypeDef({ typeDefDir: scratch, cwd: here });
  if (!dts) throw new Error('napi-derive wrote no type definitions');
  fs.writeFileSync(path.join(here, 'native.d.ts'), dts);
} finally {
  fs.rmSync(scratch, { recursive: true, force: true });
}
