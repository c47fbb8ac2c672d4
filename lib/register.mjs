// customlabels/register for `node --import`: the CommonJS module, loaded
// once per thread (lib/register.js).
import './register.js';
