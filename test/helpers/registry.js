'use strict';
// A registry on 127.0.0.1 that serves a few tarballs, for tests of what npm
// does with a package that comes from a registry.  npm treats a dependency
// installed from a tarball path differently from a registry one: its
// allowScripts policy matches a name ("customlabels": true) only against a
// registry dependency, by the name and version in the tarball's URL.  So a
// test of that policy needs a registry, and this one serves what the
// package needs and nothing else, with no network.
//
//   const registry = await start([tarball, ...]);   // each an npm pack .tgz
//   npm(['install', 'customlabels', `--registry=${registry.url}`], ...)
//   registry.close()
//
// The server runs in a child process: the tests run npm with execFileSync,
// which would block a server in their own event loop.

const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const { execFileSync, spawn } = require('node:child_process');

// The package.json inside an npm pack tarball (package/package.json).
function manifestOf(tarball) {
  return JSON.parse(execFileSync('tar', ['-xzOf', tarball, 'package/package.json'], { encoding: 'utf8' }));
}

function serve(tarballs) {
  // name -> { packument, files: basename -> bytes }
  const packages = new Map();
  const server = http.createServer((req, res) => {
    const url = decodeURIComponent(req.url.split('?')[0]);
    const [, name, dash, file] = url.match(/^\/((?:@[^/]+\/)?[^/]+)(?:\/(-)\/([^/]+))?$/) ?? [];
    const found = packages.get(name);
    if (!found) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
    } else if (!dash) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(found.packument()));
    } else if (found.files.has(file)) {
      res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(found.files.get(file));
    } else {
      res.writeHead(404).end();
    }
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const url = `http://127.0.0.1:${server.address().port}/`;
      for (const tarball of tarballs) {
        const bytes = fs.readFileSync(tarball);
        const manifest = manifestOf(tarball);
        const file = `${manifest.name.replace(/^@[^/]+\//, '')}-${manifest.version}.tgz`;
        const entry = packages.get(manifest.name) ?? { files: new Map(), versions: {} };
        entry.files.set(file, bytes);
        entry.versions[manifest.version] = {
          ...manifest,
          _id: `${manifest.name}@${manifest.version}`,
          dist: {
            tarball: `${url}${manifest.name}/-/${file}`,
            integrity: `sha512-${crypto.createHash('sha512').update(bytes).digest('base64')}`,
            shasum: crypto.createHash('sha1').update(bytes).digest('hex'),
          },
        };
        entry.packument = () => ({
          name: manifest.name,
          'dist-tags': { latest: Object.keys(entry.versions).at(-1) },
          versions: entry.versions,
        });
        packages.set(manifest.name, entry);
      }
      resolve({ url, close: () => server.close() });
    });
  });
}

// Starts the server in a child process; resolves once it listens.
function start(tarballs) {
  const child = spawn(process.execPath, [__filename, ...tarballs], { stdio: ['pipe', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the test registry exited (${code})`)));
    child.stdout.setEncoding('utf8').once('data', (line) => {
      resolve({ url: line.trim(), close: () => { child.stdin.end(); child.kill(); } });
    });
  });
}

// The server ends when the tests' process does (its stdin closes), even if
// they never call close().
if (require.main === module) {
  serve(process.argv.slice(2)).then(({ url }) => process.stdout.write(`${url}\n`));
  process.stdin.resume().on('end', () => process.exit(0));
}

module.exports = { start, manifestOf };
