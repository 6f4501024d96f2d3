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
//   node scripts/build.js --target PLATFORM
//                                  the release binaries of another platform's
//                                  package (napi-rs's names: linux-arm64-gnu,
//                                  linux-x64-musl, linux-arm64-musl,
//                                  darwin-x64, darwin-arm64, win32-x64-gnu),
//                                  cross-built here: zig for Linux and macOS,
//                                  mingw-w64 for Windows (scripts/release.sh)
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
const typedefs = args.includes('--typedefs') ? path.resolve(args[args.indexOf('--typedefs') + 1]) : null;

/**
 * The platforms a release builds, by napi-rs's name: the Rust target, zig's
 * target (with the oldest glibc; none: mingw-w64's linker), and what the
 * platform needs besides. musl's cdylibs link its C library dynamically
 * (the static default cannot make a shared library).
 */
const TARGETS = {
  'linux-x64-gnu': { triple: 'x86_64-unknown-linux-gnu', zig: 'x86_64-unknown-linux-gnu.2.17' },
  'linux-arm64-gnu': { triple: 'aarch64-unknown-linux-gnu', zig: 'aarch64-unknown-linux-gnu.2.17' },
  'linux-x64-musl': { triple: 'x86_64-unknown-linux-musl', zig: 'x86_64-unknown-linux-musl', dynamicCrt: true },
  'linux-arm64-musl': { triple: 'aarch64-unknown-linux-musl', zig: 'aarch64-unknown-linux-musl', dynamicCrt: true },
  'darwin-x64': { triple: 'x86_64-apple-darwin', zig: 'x86_64-apple-darwin' },
  'darwin-arm64': { triple: 'aarch64-apple-darwin', zig: 'aarch64-apple-darwin' },
  'win32-x64-gnu': { triple: 'x86_64-pc-windows-gnu', zig: null },
};
const named = args.includes('--target') ? args[args.indexOf('--target') + 1] : null;
if (named && !TARGETS[named]) {
  console.error(`honker: unknown --target ${named} (one of ${Object.keys(TARGETS).join(', ')})`);
  process.exit(2);
}
const cross = named ? TARGETS[named] : args.includes('--zig') ? TARGETS['linux-x64-gnu'] : null;
const zig = Boolean(cross && cross.zig);
const release = Boolean(cross) || process.env.HONKER_NODE_PROFILE !== 'debug';
const platform = named || (cross ? 'linux-x64-gnu' : platformName());
const out = checkoutDir(platform);
const target = path.dirname(path.dirname(out));

function cargo(cargoArgs, env, what) {
  const cmd = process.env.CARGO || 'cargo';
  // cargo-zigbuild leaves an empty object file in its working directory
  // for Apple targets: a cross build works in the build directory instead.
  const cwd = cross ? path.join(target, 'cross') : here;
  fs.mkdirSync(cwd, { recursive: true });
  try {
    return execFileSync(cmd, cargoArgs, {
      cwd,
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

/** Whole-program optimization, no debug info (scripts/release.sh gives the wheels the same). */
const RELEASE_LTO = {
  CARGO_PROFILE_RELEASE_LTO: 'fat',
  CARGO_PROFILE_RELEASE_CODEGEN_UNITS: '1',
  CARGO_PROFILE_RELEASE_DEBUG: '0',
};

/** The environment of a cross build: musl's dynamic C library, Windows's stand-in libnode. */
function crossEnv() {
  const env = {};
  if (!cross) return env;
  const key = cross.triple.toUpperCase().replace(/-/g, '_');
  if (cross.dynamicCrt) env[`CARGO_TARGET_${key}_RUSTFLAGS`] = '-C target-feature=-crt-static';
  // Another platform's package is built whole-program optimized: a third
  // smaller (Windows's addon 11.5 MB → 8.2 MB), which keeps each package
  // under 12 MB. (linux-x64-gnu keeps the profile .ci/run measures.)
  if (cross.triple !== 'x86_64-unknown-linux-gnu') Object.assign(env, RELEASE_LTO);
  // The oldest macOS the packages say they run on (zig's default is newer).
  if (cross.triple.endsWith('apple-darwin')) env.MACOSX_DEPLOYMENT_TARGET = '11.0';
  if (cross.triple.endsWith('windows-gnu')) {
    // napi's build script insists on a libnode.dll to link against, though
    // with its dyn-symbols feature (on for Windows, Cargo.toml) the addon
    // looks Node-API up in the host process and imports nothing from it:
    // an empty DLL satisfies the linker (check-packages.sh checks the
    // addon's imports).
    const dir = path.join(target, 'cross', 'libnode');
    const dll = path.join(dir, 'libnode.dll');
    if (!fs.existsSync(dll)) {
      fs.mkdirSync(dir, { recursive: true });
      const empty = path.join(dir, 'empty.c');
      fs.writeFileSync(empty, '/* nothing: see scripts/build.js */\n');
      execFileSync('x86_64-w64-mingw32-gcc', ['-shared', '-o', dll, empty], { stdio: 'inherit' });
    }
    env.LIBNODE_PATH = dir;
  }
  return env;
}

function build(manifest, targetDir, crate, env, what) {
  let cargoArgs = ['build'];
  if (zig) cargoArgs = ['zigbuild', '--target', cross.zig];
  else if (cross) cargoArgs = ['build', '--target', cross.triple];
  env = { ...crossEnv(), ...env };
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
  cross ? path.join(target, 'zig-node') : null,
  'honker_node',
  addonEnv,
  'the native addon',
);
/**
 * The extension's SQLite headers (extension/sqlite3/, 3.40.1) for another
 * machine's build, with `va_list` spelled `void *`. libsqlite3-sys's
 * bindgen drops `va_list` when cross-compiling (the host's stdarg.h is not
 * the target's) yet still names it in sqlite3_api_routines, which then does
 * not compile. The fields that take one are function pointers honker never
 * calls (libsqlite3-sys skips them too): any parameter type gives the same
 * layout.
 */
function crossHeaders() {
  const dir = path.join(target, 'cross', 'sqlite3-headers');
  fs.mkdirSync(dir, { recursive: true });
  for (const h of ['sqlite3.h', 'sqlite3ext.h']) {
    const text = fs.readFileSync(path.join(root, 'extension', 'sqlite3', h), 'utf8');
    fs.writeFileSync(path.join(dir, h), text.replace(/\bva_list\b/g, 'void *'));
  }
  return { SQLITE3_INCLUDE_DIR: dir, SQLITE3_LIB_DIR: dir };
}

// The SQL extension: its own workspace (see extension/Cargo.toml), in the
// same target directory.
const extension = build(
  path.join(root, 'extension', 'Cargo.toml'),
  cross ? path.join(target, 'zig-ext') : target,
  'honker_ext',
  cross && cross.triple !== 'x86_64-unknown-linux-gnu' ? crossHeaders() : {},
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
    // This machine's strip knows its own format only; another platform's
    // binaries go through LLVM's (Mach-O: local symbols only, the exports
    // stay).
    const other = cross && cross.triple !== 'x86_64-unknown-linux-gnu';
    const tool = other ? process.env.HONKER_LLVM_STRIP || 'llvm-strip-14' : 'strip';
    const how = other && cross.triple.includes('apple') ? ['-x'] : ['--strip-unneeded'];
    try {
      execFileSync(tool, [...how, '-o', tmp, from], { stdio: 'inherit' });
      stripped = true;
    } catch (e) {
      // Another platform's binary is never shipped with its debug info.
      if (other) throw e;
      // no strip on this machine: ship it as it is
    }
  }
  if (!stripped) fs.copyFileSync(from, tmp);
  // Renamed into place: a process that has the old file loaded keeps it.
  fs.renameSync(tmp, dest);
  return dest;
}
place(addon, 'honker.node');
// One name on every platform (Windows's cargo names it honker_ext.dll):
// SQLite derives the entry point, sqlite3_honkerext_init, from either.
place(extension, `libhonker_ext${path.extname(extension)}`);
console.error(`honker: built ${platform} into ${out}`);
