// The loader (binding.js): where the addon and the extension come from, and
// what a user reads when there is no addon for the platform.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import honker from '../index.js';

const require = createRequire(import.meta.url);
const binding = require('../binding.js');
const here = path.dirname(fileURLToPath(import.meta.url));

test('in a checkout the addon and the extension come from the build directory, not the source tree', () => {
  const where = binding.locate();
  assert.equal(where.from, 'checkout');
  assert.equal(path.dirname(where.addon), binding.checkoutDir(binding.platformName()));
  assert.ok(!where.addon.startsWith(path.resolve(here, '..') + path.sep), where.addon);
  assert.equal(honker.extensionPath, where.extension);
  assert.ok(fs.existsSync(honker.extensionPath), honker.extensionPath);
  for (const stale of ['honker.node', 'libhonker_ext.so']) {
    assert.ok(!fs.existsSync(path.join(here, '..', stale)), `${stale} in bindings-node/`);
  }
});

test('the platform name follows napi-rs (linux-x64-gnu here)', () => {
  const name = binding.platformName();
  assert.match(name, /^(linux-(x64|arm64|arm|ia32|riscv64|s390x|ppc64|loong64)-(gnu|musl)|darwin-(x64|arm64)|win32-(x64|arm64|ia32)-gnu|[a-z0-9]+-[a-z0-9]+)$/);
  if (process.platform === 'linux' && process.arch === 'x64' && process.report.getReport().header.glibcVersionRuntime) {
    assert.equal(name, 'linux-x64-gnu');
  }
});

test('musl is told from /usr/bin/ldd, and from the process report only where ldd does not say', () => {
  const alpine = '#!/bin/sh\nexec /lib/ld-musl-x86_64.so.1 --list "$@"\n';
  const debian = '#!/bin/bash\n# Copyright (C) 1996-2022 Free Software Foundation, Inc.\n# This file is part of the GNU C Library.\n';
  const noReport = () => assert.fail('the process report was asked although ldd said');
  assert.equal(binding.muslFrom(alpine, noReport), true);
  assert.equal(binding.muslFrom(debian, noReport), false);
  const glibcReport = () => ({ header: { glibcVersionRuntime: '2.36' } });
  const muslReport = () => ({ header: {} });
  for (const ldd of [null, '#!/bin/sh\necho something else\n']) {
    assert.equal(binding.muslFrom(ldd, glibcReport), false);
    assert.equal(binding.muslFrom(ldd, muslReport), true);
  }
  if (process.platform === 'linux') {
    assert.equal(binding.isMusl(), !process.report.getReport().header.glibcVersionRuntime, 'ldd and the report agree here');
  }
});

test('with no addon, the error says what was tried and what to do', () => {
  const prebuilt = binding.explain('linux-x64-gnu', ['honker-linux-x64-gnu: not installed']);
  assert.match(prebuilt, /no native addon for linux-x64-gnu/);
  assert.match(prebuilt, /honker-linux-x64-gnu: not installed/);
  assert.match(prebuilt, /--omit=optional/);
  assert.match(prebuilt, /npm install honker-linux-x64-gnu@\d+\.\d+\.\d+/);
  // Every platform of a release has its package (README, "Platforms").
  const mac = binding.explain('darwin-arm64', ['honker-darwin-arm64: not installed']);
  assert.match(mac, /npm install honker-darwin-arm64@\d+\.\d+\.\d+/);
  const other = binding.explain('freebsd-x64', ['honker-freebsd-x64: not installed']);
  assert.match(other, /published for linux-x64-gnu, linux-arm64-gnu, .*win32-x64-gnu only/);
  assert.match(other, /Rust 1\.89/);
  assert.match(other, /npm run build/);
});

test('every platform with a prebuilt package has its folder under npm/, named as the loader asks for it', () => {
  const folders = fs.readdirSync(path.join(here, '..', 'npm'));
  assert.deepEqual(folders.sort(), [...binding.PREBUILT].sort());
  const pkg = require('../package.json');
  for (const platform of binding.PREBUILT) {
    const sub = require(`../npm/${platform}/package.json`);
    assert.equal(sub.name, `honker-${platform}`);
    assert.equal(sub.version, pkg.version);
    assert.equal(pkg.optionalDependencies[sub.name], pkg.version);
    // The extension keeps its platform's suffix (SQLite finds the same entry point).
    const suffix = platform.startsWith('darwin') ? 'dylib' : platform.startsWith('win32') ? 'dll' : 'so';
    assert.deepEqual(sub.files.sort(), ['honker.node', `libhonker_ext.${suffix}`]);
    assert.deepEqual(sub.os, [platform.split('-')[0]]);
    assert.deepEqual(sub.cpu, [platform.split('-')[1]]);
    assert.equal(sub.main, 'honker.node');
  }
  // The published package carries the loader and no binary.
  assert.ok(pkg.files.includes('binding.js'));
  assert.ok(!pkg.files.some((f) => /\.(node|so|dylib|dll)$/.test(f)));
});

test('the build from source says what is missing when there is no cargo', () => {
  const env = { PATH: path.dirname(process.execPath) + ':/usr/bin:/bin', HOME: process.env.HOME };
  const which = spawnSync('sh', ['-c', 'command -v cargo'], { env });
  if (which.status === 0) return; // cargo is on the system PATH here: nothing to show
  const r = spawnSync(process.execPath, [path.join(here, '..', 'scripts', 'build.js')], { env, encoding: 'utf8' });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /needs cargo \(Rust 1\.89 or later, https:\/\/rustup\.rs\)/);
  assert.match(r.stderr, /not on PATH/);
});
