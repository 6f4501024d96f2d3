// The README's Node quickstart runs as written (docs are executed).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { tempDir } from './helpers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

test('the README Node quickstart runs', () => {
  const readme = fs.readFileSync(path.join(here, '../../README.md'), 'utf8');
  const [, code] = readme.match(/```js\n([\s\S]*?)```/);
  // The snippet's worker stops itself after the first email.
  const prelude =
    "const sendConfirmation = async (to, template) => { console.log('sent', to, template); stop.abort(); };\n";
  // Inside the package, so `import ... from 'honker'` resolves to it.
  const file = path.join(here, `.readme-${process.pid}.mjs`);
  fs.writeFileSync(file, prelude + code);
  const cwd = tempDir('honker-readme-');
  try {
    const out = execFileSync(process.execPath, [file], { cwd, encoding: 'utf8' });
    assert.equal(out.trim(), 'sent alice@example.com order-confirmed');
  } finally {
    fs.rmSync(file);
  }
});

test("the README's Worker snippet runs", () => {
  const readme = fs.readFileSync(path.join(here, '../../README.md'), 'utf8');
  const code = [...readme.matchAll(/```js\n([\s\S]*?)```/g)][1][1];
  // The snippet's worker stops after one email.
  const prelude = [
    "import { open, Worker } from 'honker';",
    "const db = await open('app.db');",
    "await db.queue('emails').enqueue({ to: 'bob@example.com', template: 'welcome' });",
    "const mailer = { send: async (p, { signal }) => { console.log('mailed', p.to, signal.aborted); worker.stop(); } };",
    '',
  ].join('\n');
  const file = path.join(here, `.readme-worker-${process.pid}.mjs`);
  fs.writeFileSync(file, `${prelude + code}\nawait db.close();\n`);
  const cwd = tempDir('honker-readme-');
  try {
    const out = execFileSync(process.execPath, [file], { cwd, encoding: 'utf8', timeout: 30_000 });
    assert.equal(out.trim(), 'mailed bob@example.com false');
  } finally {
    fs.rmSync(file);
  }
});

test("the README's streams snippet runs", () => {
  const readme = fs.readFileSync(path.join(here, '../../README.md'), 'utf8');
  const code = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].find((m) => m[1].includes('db.stream('))[1];
  const prelude = "import { open } from 'honker';\nconst db = await open('app.db');\n";
  const file = path.join(here, `.readme-streams-${process.pid}.mjs`);
  fs.writeFileSync(file, prelude + code + 'await db.close();\n');
  const cwd = tempDir('honker-readme-');
  try {
    const out = execFileSync(process.execPath, [file], { cwd, encoding: 'utf8', timeout: 30_000 });
    assert.equal(out.trim(), 'event 1 paid\nheard 7');
  } finally {
    fs.rmSync(file);
  }
});

test("the README's consumer groups snippet runs", () => {
  const readme = fs.readFileSync(path.join(here, '../../README.md'), 'utf8');
  const code = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].find((m) => m[1].includes('.group('))[1];
  const prelude =
    "import { open } from 'honker';\nconst db = await open('app.db');\n" +
    "await db.execute('CREATE TABLE invoices (order_id INTEGER)');\n" +
    "const orders = db.stream('orders');\nawait orders.publish({ order: 7 }, { key: 'order-7' });\n";
  const check =
    "const [row] = await db.query('SELECT order_id FROM invoices');\n" +
    "const info = await billing.info();\nconsole.log(row.order_id, info.pending, info.delivered);\n";
  const file = path.join(here, `.readme-groups-${process.pid}.mjs`);
  fs.writeFileSync(file, prelude + code + check + 'await db.close();\n');
  const cwd = tempDir('honker-readme-');
  try {
    const out = execFileSync(process.execPath, [file], { cwd, encoding: 'utf8', timeout: 30_000 });
    assert.equal(out.trim(), 'invoiced 7\n7 0 0');
  } finally {
    fs.rmSync(file);
  }
});

test("the README's locks and rate limits snippet runs", () => {
  const readme = fs.readFileSync(path.join(here, '../../README.md'), 'utf8');
  const code = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].find((m) => m[1].includes('.lock('))[1];
  const prelude =
    "import { open } from 'honker';\nconst db = await open('app.db');\n" +
    "await db.execute('CREATE TABLE search_state (version INTEGER)');\n" +
    "await db.execute('INSERT INTO search_state VALUES (0)');\n";
  const check =
    "const [row] = await db.query('SELECT version FROM search_state');\n" +
    "console.log(row.version, await reindex.info());\n";
  const file = path.join(here, `.readme-locks-${process.pid}.mjs`);
  fs.writeFileSync(file, prelude + code + check + 'await db.close();\n');
  const cwd = tempDir('honker-readme-');
  try {
    const out = execFileSync(process.execPath, [file], { cwd, encoding: 'utf8', timeout: 30_000 });
    assert.equal(out.trim(), 'sent\n1 null');
  } finally {
    fs.rmSync(file);
  }
});
