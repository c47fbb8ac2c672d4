'use strict';
// `npm pack` of this repository, made once per test run and shared by the
// tests that install it (packing builds the prebuilt addons, which takes a
// while).  The tarball is removed when the process exits.
//
// CUSTOMLABELS_TEST_TARBALL names a tarball packed already from this same
// checkout: .ci/run packs once and runs the suite on every Node version
// with it (one Node-API build serves them all), instead of packing, and
// building both architectures' prebuilds, again in each run.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const ROOT = path.resolve(__dirname, '..', '..');
let tarball = null;

function npm(args, options) {
  return execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'],
    { encoding: 'utf8', timeout: 300000, ...options });
}

function pack() {
  if (tarball !== null) return tarball;
  const given = process.env.CUSTOMLABELS_TEST_TARBALL;
  if (given) {
    if (!fs.existsSync(given)) throw new Error(`CUSTOMLABELS_TEST_TARBALL=${given}: no such file`);
    tarball = given;
    return tarball;
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-pack-'));
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  npm(['pack', '--pack-destination', dir, '--silent'], { cwd: ROOT });
  const name = fs.readdirSync(dir).find((f) => f.endsWith('.tgz'));
  if (!name) throw new Error(`npm pack left no tarball in ${dir}`);
  tarball = path.join(dir, name);
  return tarball;
}

module.exports = { pack, npm, ROOT };
