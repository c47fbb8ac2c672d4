'use strict';
// Label objects that this package builds (getLabels, the span labels of
// customlabels/otel): plain objects whose every label is an own property.
// A label may be named "__proto__" (JSON.parse makes such a key), and an
// assignment to that name would set the object's prototype instead of
// adding the label; such a key is defined as an own property, and the
// prototype stays Object.prototype.

const defineProperty = Object.defineProperty;

function setLabel(object, key, value) {
  if (key === '__proto__') {
    defineProperty(object, key, { value, writable: true, enumerable: true, configurable: true });
  } else {
    object[key] = value;
  }
}

module.exports = { setLabel };
