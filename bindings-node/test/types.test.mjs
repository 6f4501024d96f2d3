// The declarations match the module: every value index.d.ts declares is
// exported (and nothing else), by both entry points. (tsc checks the types
// themselves over examples/typed.ts; scripts/test.sh regenerates
// native.d.ts and fails when the committed one is stale.)
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import * as esm from '../index.mjs';

const require = createRequire(import.meta.url);
const cjs = require('../index.js');
const dts = fs.readFileSync(new URL('../index.d.ts', import.meta.url), 'utf8');

test('index.d.ts declares exactly the exported values', () => {
  const declared = new Set(
    [...dts.matchAll(/^export (?:declare )?(?:class|function|const) (\w+)/gm)].map((m) => m[1]),
  );
  assert.deepEqual([...declared].sort(), Object.keys(cjs).sort());
});

test('the ESM and CommonJS entry points export the same objects', () => {
  for (const [k, v] of Object.entries(cjs)) assert.equal(esm[k], v, k);
  assert.equal(esm.default, cjs);
});

test('the error code union is the native list', () => {
  const union = dts.match(/export type ErrorCode =([^;]+);/)[1];
  const codes = [...union.matchAll(/'(\w+)'/g)].map((m) => m[1]);
  assert.deepEqual(codes.sort(), [...cjs.ERROR_CODES].sort());
});
