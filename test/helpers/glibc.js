'use strict';
// The newest glibc an ELF file needs: the highest GLIBC_x.y[.z] among its
// version needs (readelf -V, section .gnu.version_r).  The dynamic loader
// checks each of them against the libc.so.6 it finds before the file runs
// or loads, and refuses the file ("version `GLIBC_2.34' not found") where
// one is missing.  null where the file needs none.

const { spawnSync } = require('node:child_process');

// The oldest glibc the prebuilt files are made for: RHEL 8 and its rebuilds
// (Debian 11 has 2.31).
const OLDEST = '2.28';

function compareVersions(a, b) {
  const x = a.split('.').map(Number);
  const y = b.split('.').map(Number);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) - (y[i] ?? 0);
  }
  return 0;
}

function newestGlibc(file) {
  const r = spawnSync('readelf', ['-V', '-W', file], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`readelf -V ${file} failed: ${r.stderr}`);
  const needs = r.stdout.split('Version needs section')[1] ?? '';
  const versions = [...needs.matchAll(/Name: GLIBC_(\d+(?:\.\d+)+)\b/g)].map((m) => m[1]);
  return versions.sort(compareVersions).at(-1) ?? null;
}

module.exports = { OLDEST, compareVersions, newestGlibc };
