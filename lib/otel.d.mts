// Declarations of customlabels/otel for ES modules.  `import` loads
// lib/otel.js itself (Node finds its named export), so both module systems
// share one instance.
import * as otel from './otel.js';

export * from './otel.js';
export default otel;
