// One version for every package (issue 17 §3): the addon's, the npm
// package's and SQL's honker_version() are the Cargo workspace's.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import honker from '../index.js';
import { tempPath } from './helpers.mjs';

const require = createRequire(import.meta.url);

test('the version is the one version of every package', async () => {
  const cargo = fs.readFileSync(new URL('../../Cargo.toml', import.meta.url), 'utf8');
  const workspace = /\[workspace\.package\][^[]*?^version = "([^"]+)"/ms.exec(cargo)[1];
  assert.equal(honker.version, workspace);
  assert.equal(require('../package.json').version, workspace);
  const db = await honker.open(tempPath());
  // The SQL functions live on the writer connection, where transactions run.
  const rows = await db.transaction((tx) => tx.query('SELECT honker_version() AS v'));
  assert.deepEqual(rows, [{ v: workspace }]);
  await db.close();
});
