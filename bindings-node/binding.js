'use strict';
// Finds honker's native addon and its SQL extension for the running platform.
//
// Published installs: the prebuilt package for the platform, an optional
// dependency of `honker` (`honker-linux-x64-gnu`, the napi-rs layout; npm
// installs only the one whose os/cpu/libc match). A checkout of the
// repository: the addon that `npm run build` left in the cargo target
// directory (target/node/<platform>/), never a file in the source tree.
// When neither is there, the error says what was tried and what to do.

const fs = require('node:fs');
const path = require('node:path');

const pkg = require('./package.json');

/** Platforms with a published prebuilt package (README, "Platforms"; scripts/release.sh builds them). */
const PREBUILT = [
  'linux-x64-gnu',
  'linux-arm64-gnu',
  'linux-x64-musl',
  'linux-arm64-musl',
  'darwin-x64',
  'darwin-arm64',
  'win32-x64-gnu',
];

/**
 * Whether this Linux runs musl. /usr/bin/ldd is a script that names its C
 * library (glibc's says "GNU C Library"; Alpine's runs ld-musl): reading it
 * takes about 0.2 ms, where the process report took 3.5-5.4 ms of every
 * start (ADR 29). The report is the fallback: glibc gives its version there,
 * musl does not.
 */
function isMusl() {
  let ldd = null;
  try {
    ldd = fs.readFileSync('/usr/bin/ldd', 'latin1');
  } catch {
    // No ldd (a distroless image): the report says.
  }
  return muslFrom(ldd, () => (process.report && typeof process.report.getReport === 'function' ? process.report.getReport() : null));
}

/** isMusl's decision, from ldd's text (null: unread) and a way to get the process report. */
function muslFrom(ldd, report) {
  if (ldd !== null) {
    if (ldd.includes('musl')) return true;
    if (ldd.includes('GNU C Library') || ldd.includes('GLIBC')) return false;
  }
  const r = report();
  return !(r && r.header && r.header.glibcVersionRuntime);
}

/**
 * napi-rs's platform names: linux-x64-gnu, linux-arm64-musl, darwin-arm64, ...
 * Windows's addon is built with mingw-w64 (win32-x64-gnu): Microsoft's SDK is
 * not needed to build it, and Node (an MSVC build) loads it the same.
 */
function platformName() {
  const { platform, arch } = process;
  if (platform === 'linux') return `linux-${arch}-${isMusl() ? 'musl' : 'gnu'}`;
  if (platform === 'win32') return `win32-${arch}-gnu`;
  return `${platform}-${arch}`;
}

function extensionFile(dir) {
  const suffix = process.platform === 'darwin' ? 'dylib' : process.platform === 'win32' ? 'dll' : 'so';
  return path.join(dir, `libhonker_ext.${suffix}`);
}

/** True in a checkout of the repository (the published package has no Cargo.toml). */
function isCheckout() {
  return fs.existsSync(path.join(__dirname, 'Cargo.toml'));
}

/** Where `npm run build` puts the addon in a checkout: target/node/<platform>/. */
function checkoutDir(platform) {
  const target = process.env.CARGO_TARGET_DIR || path.join(__dirname, '..', 'target');
  return path.join(path.resolve(target), 'node', platform);
}

class NativeBindingError extends Error {
  constructor(message, cause) {
    super(message, cause ? { cause } : undefined);
    this.name = 'NativeBindingError';
    this.code = 'NATIVE_BINDING_MISSING';
  }
}

function explain(platform, tried) {
  const lines = [`honker: no native addon for ${platform} (Node ${process.version}).`, 'Tried:'];
  for (const t of tried) lines.push(`  - ${t}`);
  if (PREBUILT.includes(platform)) {
    lines.push(
      `The prebuilt addon for ${platform} is the package honker-${platform}, an optional dependency of honker ` +
        `${pkg.version}. It was not installed: install without --omit=optional / --no-optional, or add it ` +
        `yourself: npm install honker-${platform}@${pkg.version}`,
    );
  } else {
    lines.push(
      `Prebuilt addons are published for ${PREBUILT.join(', ')} only. On ${platform}, build from source ` +
        '(Rust 1.89 or later from https://rustup.rs): in a checkout of honker, `cd bindings-node && npm install && ' +
        'npm run build`, then `npm install /path/to/honker/bindings-node` in your project.',
    );
  }
  return lines.join('\n');
}

/**
 * Where the addon and the extension are: `{ platform, addon, extension, from }`.
 * Throws NativeBindingError, saying what was tried, when there is none.
 */
function locate() {
  const platform = platformName();
  const tried = [];
  if (isCheckout()) {
    const dir = checkoutDir(platform);
    const addon = path.join(dir, 'honker.node');
    if (fs.existsSync(addon)) return { platform, addon, extension: extensionFile(dir), from: 'checkout' };
    tried.push(`${addon}: not built (a checkout builds it with \`npm run build\`)`);
  }
  const name = `honker-${platform}`;
  let manifest;
  try {
    manifest = require.resolve(`${name}/package.json`);
  } catch (e) {
    if (e.code !== 'MODULE_NOT_FOUND') throw e;
    tried.push(`${name}: not installed`);
    throw new NativeBindingError(explain(platform, tried));
  }
  const dir = path.dirname(manifest);
  const main = require(manifest).main;
  return { platform, addon: path.join(dir, main), extension: extensionFile(dir), from: name };
}

/** Loads the addon: `{ addon, extensionPath }`. */
function load() {
  const where = locate();
  try {
    return { addon: require(where.addon), extensionPath: where.extension };
  } catch (e) {
    throw new NativeBindingError(
      `honker: the native addon ${where.addon} (${where.from}) did not load: ${e.message}\n` +
        'The prebuilt addons need Node 18 or later, and on Linux glibc 2.17 or later (or musl 1.2), ' +
          'on macOS 11 or later, on Windows 10 or later.',
      e,
    );
  }
}

module.exports = { load, locate, platformName, isMusl, muslFrom, checkoutDir, isCheckout, explain, NativeBindingError, PREBUILT };
