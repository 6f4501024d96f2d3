#!/usr/bin/env node
// Builds the native addon and the SQL extension from source with cargo, into
// the build directory: <cargo target dir>/node/<platform>/honker.node and
// libhonker_ext.so (stripped), where ./binding.js finds them in a checkout.
// Nothing is written into the source tree.
//
//   npm run build                  release build for this machine
//   node scripts/build.js --zig    the release binaries a published package
//                                  carries: linux-x64-gnu against glibc 2.17,
//                                  with cargo-zigbuild (scripts/test.sh)
//   --typedefs DIR                 napi-derive writes its type definitions to
//                                  DIR (scripts/types.mjs turns them into
//                                  native.d.ts)
//
// HONKER_NODE_PROFILE=debug builds without optimizations.
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { checkoutDir, platformName } = require('../binding.js');

const here = path.resolve(__dirname, '..');
const root = path.resolve(here, '..');
const args = process.argv.slice(2);
const zig = args.includes('--zig');
const typedefs = args.includes('--typedefs') ? path.resolve(args[args.indexOf('--typedefs') + 1]) : null;
const release = zig || process.env.HONKER_NODE_PROFILE !== 'debug';
const ZIG_TARGET = 'x86_64-unknown-linux-gnu.2.17';
const platform = zig ? 'linux-x64-gnu' : platformName();
const out = checkoutDir(platform);
const target = path.dirname(path.dirname(out));

function cargo(cargoArgs, env, what) {
  const cmd = process.env.CARGO || 'cargo';
  try {
    return execFileSync(cmd, cargoArgs, {
      cwd: here,
      stdio: ['ignore', 'pipe', 'inherit'],
      maxBuffer: 256 << 20,
      env: { ...process.env, ...env },
    });
  } catch (e) {
    if (e.code === 'ENOENT') {
      console.error(
        `honker: building ${what} from source needs cargo (Rust 1.89 or later, https://rustup.rs), ` +
          `and \`${cmd}\` is not on PATH.` +
          (zig ? ' --zig also needs cargo-zigbuild and zig (scripts/deps.sh installs them).' : ''),
      );
    } else {
      console.error(`honker: building ${what} failed (cargo's messages are above)`);
    }
    process.exit(1);
  }
}

/** The library cargo reports for `crate` in its JSON messages. */
function artifact(output, crate) {
  let lib;
  for (const line of output.toString().split('\n')) {
    if (!line.startsWith('{')) continue;
    const msg = JSON.parse(line);
    if (msg.reason === 'compiler-artifact' && msg.target && msg.target.name === crate) {
      lib = msg.filenames.find((f) => /\.(so|dylib|dll)$/.test(f));
    }
  }
  if (!lib) {
    console.error(`honker: cargo reported no ${crate} library`);
    process.exit(1);
  }
  return lib;
}

function build(manifest, targetDir, crate, env, what) {
  const cargoArgs = zig ? ['zigbuild', '--target', ZIG_TARGET] : ['build'];
  cargoArgs.push('--locked', '--manifest-path', manifest, '--message-format', 'json-render-diagnostics');
  if (targetDir) cargoArgs.push('--target-dir', targetDir);
  if (release) cargoArgs.push('--release');
  return artifact(cargo(cargoArgs, env, what), crate);
}

// The addon (the root workspace). The zig build has its own directory: its
// compiler and flags differ, and sharing one would rebuild both every time.
const addonEnv = {};
if (typedefs) {
  // napi-derive writes type definitions only when this folder is set; the
  // second variable makes cargo re-run it even if nothing changed.
  addonEnv.NAPI_TYPE_DEF_TMP_FOLDER = typedefs;
  addonEnv.NAPI_FORCE_BUILD_HONKER_NODE = String(Date.now());
}
const addon = build(
  path.join(here, 'Cargo.toml'),
  zig ? path.join(target, 'zig-node') : null,
  'honker_node',
  addonEnv,
  'the native addon',
);
// The SQL extension: its own workspace (see extension/Cargo.toml), in the
// same target directory.
const extension = build(
  path.join(root, 'extension', 'Cargo.toml'),
  zig ? path.join(target, 'zig-ext') : target,
  'honker_ext',
  {},
  'the SQL extension',
);

// Release builds are copied without their debug info (the release profile
// keeps `debug = 1` for backtraces during development: 37 MB instead of 4).
fs.mkdirSync(out, { recursive: true });
function place(from, name) {
  const dest = path.join(out, name);
  const tmp = `${dest}.tmp-${process.pid}`;
  let stripped = false;
  if (release) {
    try {
      execFileSync('strip', ['--strip-unneeded', '-o', tmp, from], { stdio: 'inherit' });
      stripped = true;
    } catch {
      // no strip on this machine: ship it as it is
    }
  }
  if (!stripped) fs.copyFileSync(from, tmp);
  // Renamed into place: a process that has the old file loaded keeps it.
  fs.renameSync(tmp, dest);
  return dest;
}
place(addon, 'honker.node');
place(extension, path.basename(extension));
console.error(`honker: built ${platform} into ${out}`);
