// Loaded before jco (`node --import`) by build.sh. jco 1.35.0 reads WIT in
// a WebAssembly component run on preview2-shim 0.26, which preopens no
// directory (0.25 preopened `/`), so every path reads as missing ("No such
// file or directory (os error 44)"). This gives that component the working
// directory, under its own path; build.sh runs jco from the WIT package.

import { realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

// The shim instance jco-transpile's component imports, found as it finds it.
const jco = createRequire(realpathSync(process.argv[1]));
const transpile = createRequire(jco.resolve('@bytecodealliance/jco-transpile'));
const shim = await import(pathToFileURL(transpile.resolve('@bytecodealliance/preview2-shim/filesystem')).href);
if (typeof shim._addPreopen !== 'function') {
  throw new Error('jco-preopen.mjs: this preview2-shim has no _addPreopen; is jco still 1.35.0?');
}
shim._addPreopen(process.cwd(), process.cwd());
