// The `honker` command the package installs (cli.js, package.json "bin"):
// the operator's command of the Rust crate run inside the addon. It sees
// what this binding wrote, keeps the binary's exit codes and stderr, and
// Ctrl-C ends a waiting `listen` at once.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { once } from 'node:events';
import { test } from 'node:test';
import honker from '../index.js';
import { tempPath } from './helpers.mjs';

const require = createRequire(import.meta.url);
const cli = new URL('../cli.js', import.meta.url).pathname;

function run(...args) {
  return spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 60_000 });
}

test('package.json installs cli.js as `honker`, and ships it', () => {
  const pkg = require('../package.json');
  assert.deepEqual(pkg.bin, { honker: 'cli.js' });
  assert.ok(pkg.files.includes('cli.js'));
  assert.ok(fs.readFileSync(cli, 'utf8').startsWith('#!/usr/bin/env node\n'));
  assert.ok(fs.statSync(cli).mode & 0o111, 'cli.js is executable');
});

test('status and jobs see what Node wrote, and read commands change nothing', async () => {
  const file = tempPath();
  const db = await honker.open(file);
  const q = db.queue('emails');
  const ids = [];
  for (const to of ['a', 'b']) ids.push((await q.enqueue({ to })).id);
  await q.enqueue({ to: 'later' }, { delay: 3_600_000 });
  await db.close();
  const before = fs.readFileSync(file);
  const status = JSON.parse(run('status', file, '--json').stdout);
  const { oldest_ready_age_ms, ...counts } = status.queues[0];
  assert.deepEqual(counts, {
    name: 'emails', ready: 2, scheduled: 1, running: 0, dead: 0, paused: null, max_running: null, max_running_per_key: null,
    round_robin: false, key_limit: null, key_per_ms: null,
  });
  assert.ok(oldest_ready_age_ms >= 0);
  const ready = JSON.parse(run('jobs', 'list', file, '--state', 'ready', '--json').stdout);
  assert.deepEqual(ready.map((j) => [j.id, j.payload]), [[ids[0], { to: 'a' }], [ids[1], { to: 'b' }]]);
  assert.match(run('status', file).stdout, /emails/);
  assert.deepEqual(fs.readFileSync(file), before, 'a read command changed the file');
});

test('write commands, exit codes and stderr are the binary\'s', async () => {
  const file = tempPath();
  await (await honker.open(file)).close();
  const done = run('enqueue', file, 'emails', '{"to":"z"}');
  assert.equal(done.status, 0, done.stderr);
  const db = await honker.open(file);
  assert.deepEqual((await db.queue('emails').getJob(Number(done.stdout))).payload, { to: 'z' });
  await db.close();
  const bad = run('enqueue', file, 'emails', '{not json');
  assert.equal(bad.status, 1);
  assert.match(bad.stderr, /^honker: INVALID_ARGUMENT: /);
  assert.match(run('jobs', 'show', file, '99').stderr, /^honker: NOT_FOUND: /);
  const usage = run('jobs', 'frobnicate', file);
  assert.equal(usage.status, 2);
  assert.match(usage.stderr, /frobnicate/);
  assert.equal(run('--version').stdout.trim(), `honker ${honker.version}`);
});

test('Ctrl-C ends a waiting listen at once', async () => {
  const file = tempPath();
  await (await honker.open(file)).close();
  const child = spawn(process.execPath, [cli, 'listen', file, 'changes'], { stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    child.stderr.setEncoding('utf8');
    child.stdout.setEncoding('utf8');
    const [first] = await once(child.stderr, 'data');
    assert.match(first, /listening/);
    const db = await honker.open(file);
    await db.notify('changes', { n: 1 });
    await db.close();
    const [line] = await once(child.stdout, 'data');
    assert.deepEqual(JSON.parse(line.slice(line.indexOf(' ') + 1)), { n: 1 });
    const started = Date.now();
    const exited = once(child, 'exit');
    child.kill('SIGINT');
    const [code, signal] = await exited;
    assert.ok(Date.now() - started < 2000, 'Ctrl-C waited for the listen to return');
    assert.deepEqual([code, signal], [null, 'SIGINT']);
  } finally {
    child.kill('SIGKILL');
  }
});
