'use strict';
// Builds lib/hooks/setwriter.wasm from src/setwriter.wat with wabt (a
// devDependency).  The .wasm is committed, so that an install needs neither
// wabt nor a compiler for it; `--check` exits 1 when the committed file is
// not this source's build (test/setwriter.test.js runs it).
//
//   node scripts/build-wasm.js [--check]

const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');
const SOURCE = path.join(ROOT, 'src', 'setwriter.wat');
const TARGET = path.join(ROOT, 'lib', 'hooks', 'setwriter.wasm');

async function build() {
  const wabt = await require('wabt')();
  const module = wabt.parseWat(SOURCE, fs.readFileSync(SOURCE, 'utf8'), { reference_types: true });
  try {
    module.validate();
    return Buffer.from(module.toBinary({ write_debug_names: false }).buffer);
  } finally {
    module.destroy();
  }
}

build().then((bytes) => {
  if (process.argv.includes('--check')) {
    const committed = fs.existsSync(TARGET) ? fs.readFileSync(TARGET) : null;
    if (committed === null || !committed.equals(bytes)) {
      process.stderr.write(`build-wasm: ${path.relative(ROOT, TARGET)} is not the build of ${path.relative(ROOT, SOURCE)}; run node scripts/build-wasm.js\n`);
      process.exit(1);
    }
    return;
  }
  fs.writeFileSync(TARGET, bytes);
  console.log(`${path.relative(ROOT, TARGET)}: ${bytes.length} bytes`);
}, (err) => {
  process.stderr.write(`build-wasm: ${err.message}\n`);
  process.exit(1);
});
