'use strict';
// docs/development.md lists lib/'s files in layers, and says that every
// file imports only files below it in that table: this reads the table and
// every require() in lib/, and fails on an import that goes up, or on a
// file of lib/ the table does not list.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');
const LIB = path.join(ROOT, 'lib');

// The table's rows, in order: for each, the files it names (a row may name
// several, as `otel.js`, `otel/manager.js`, `otel/span.js`).
function tableRows() {
  const doc = fs.readFileSync(path.join(ROOT, 'docs', 'development.md'), 'utf8');
  const start = doc.indexOf('- `lib/`:');
  const end = doc.indexOf('- `dump/`:', start);
  assert.ok(start >= 0 && end > start, 'docs/development.md has its lib/ section');
  const rows = [];
  for (const line of doc.slice(start, end).split('\n')) {
    const m = /^\s*\| (.+?) \| /.exec(line);
    if (m === null || m[1].startsWith('**') || m[1] === 'file' || m[1].startsWith('---')) continue;
    const files = [...m[1].matchAll(/`([\w/]+\.js)`/g)].map((x) => x[1]);
    if (files.length > 0) rows.push(files);
  }
  return rows;
}

function libFiles(dir = LIB, prefix = '') {
  const out = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) out.push(...libFiles(path.join(dir, entry.name), `${prefix}${entry.name}/`));
    else if (entry.name.endsWith('.js')) out.push(`${prefix}${entry.name}`);
  }
  return out;
}

// The files of lib/ that `file` requires (relative requires of .js files).
function importsOf(file) {
  const text = fs.readFileSync(path.join(LIB, file), 'utf8');
  const out = new Set();
  for (const m of text.matchAll(/require\('(\.{1,2}\/[^']+)'\)/g)) {
    let target = path.relative(LIB, path.resolve(path.dirname(path.join(LIB, file)), m[1]));
    if (target.startsWith('..')) continue; // package.json
    if (!target.endsWith('.js')) target += '.js';
    out.add(target);
  }
  return [...out];
}

describe('lib/ imports go one way, as docs/development.md lists them', function () {
  const rows = tableRows();
  const rank = new Map();
  rows.forEach((files, i) => files.forEach((f) => rank.set(f, i)));

  it('the table lists every file of lib/ once', function () {
    const listed = rows.flat();
    assert.deepEqual([...new Set(listed)].sort(), listed.slice().sort(), 'a file listed twice');
    assert.deepEqual(libFiles().sort(), listed.slice().sort());
  });

  it('every file imports only files below its row (internals.js, for tests, aside)', function () {
    const up = [];
    for (const file of libFiles()) {
      if (file === 'internals.js') continue;
      for (const target of importsOf(file)) {
        if (target === 'internals.js') up.push(`${file} imports internals.js`);
        else if (!(rank.get(target) > rank.get(file)) && !(rows[rank.get(file)].includes(target) && target !== file)) {
          up.push(`${file} (row ${rank.get(file)}) imports ${target} (row ${rank.get(target)})`);
        }
      }
    }
    assert.deepEqual(up, []);
  });

  it('the check sees an import that goes up (it can fail)', function () {
    assert.ok(importsOf('addon.js').includes('layout.js'));
    assert.ok(rank.get('addon.js') < rank.get('layout.js'));
    assert.ok(importsOf('otel/span.js').includes('index.js'));
  });
});
