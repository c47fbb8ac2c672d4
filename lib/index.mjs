// The ES module entry of customlabels: the CommonJS module's API, so that
// `import` and `require` share one instance (one current label set).
import customlabels from './index.js';

export const {
  withLabels, enterLabels, getLabels, enableThreadContext, supported, unsupportedReason, publishMode, limits,
} = customlabels;
export default customlabels;
