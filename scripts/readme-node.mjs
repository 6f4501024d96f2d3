#!/usr/bin/env node
// Runs the README's Node quickstart, and the npm package README's example, as
// written, in the project directory given (where `honker` is installed, as a
// user's project has it), each twice: as an ES module, and as CommonJS (the
// same code with `require` and an async function around it). The test
// command runs it in a fresh project that installed the packed tarballs.
// Each run must print the email it "sent".
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const project = path.resolve(process.argv[2] || '.');
// What runs each snippet: this node, or HONKER_README_NODE's command (a JSON
// array), such as another platform's node under qemu-user or Wine
// (scripts/platform-runs.sh).
const runner = process.env.HONKER_README_NODE ? JSON.parse(process.env.HONKER_README_NODE) : [process.execPath];
const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
// The snippet's worker stops itself after the first email.
const prelude =
  "const sendConfirmation = async (to, template) => { console.log('sent', to, template); stop.abort(); };\n";
const imports = /^import \{([^}]*)\} from 'honker';$/m;

// The repository's README, then the npm package's own (npm's page).
for (const [readmePath, prefix] of [['README.md', 'readme'], ['bindings-node/README.md', 'package-readme']]) {
  const readme = fs.readFileSync(path.join(root, readmePath), 'utf8');
  const match = readme.match(/```js\n([\s\S]*?)```/);
  assert.ok(match, `${readmePath} has a Node quickstart`);
  const code = match[1];
  const esm = prelude + code;
  assert.match(code, imports, `${readmePath}'s quickstart imports from 'honker'`);
  const cjs = `${code.match(imports)[0].replace(imports, "const {$1} = require('honker');")}\n(async () => {\n${prelude}${code.replace(imports, '')}\n})().catch((e) => { console.error(e); process.exit(1); });\n`;

  for (const [name, source] of [[`${prefix}.mjs`, esm], [`${prefix}.cjs`, cjs]]) {
    const file = path.join(project, name);
    fs.writeFileSync(file, source);
    for (const db of ['app.db', 'app.db-wal', 'app.db-shm']) fs.rmSync(path.join(project, db), { force: true });
    const out = execFileSync(runner[0], [...runner.slice(1), file], { cwd: project, encoding: 'utf8' });
    assert.equal(out.trim(), 'sent alice@example.com order-confirmed', `${name} printed ${out}`);
    console.log(`${name}: ${out.trim()}`);
  }
}
