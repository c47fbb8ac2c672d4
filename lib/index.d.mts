// Declarations of the ES module entry (lib/index.mjs): the same API as
// lib/index.d.ts, as named exports and as the default export.
import * as customlabels from './index.js';

export * from './index.js';
export default customlabels;
